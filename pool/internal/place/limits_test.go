package place

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The tightest limit is the one named, and the runtime's headroom comes
// off it.
func TestCheckThreadsNamesTheTightestLimit(t *testing.T) {
	bounds := []threadBound{{room: 1000, what: "loose"}, {room: 300, what: "tight"}, {room: 500, what: "middle"}}
	room := 300 - runtimeHeadroom()
	if err := checkThreads(room, "", bounds); err != nil {
		t.Errorf("%d workers in a room of %d: %v", room, room, err)
	}
	err := checkThreads(room+1, "", bounds)
	var le *LimitError
	if !errors.As(err, &le) || le.Room != room || !strings.Contains(err.Error(), "tight") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d workers", room+1)) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d more", room)) {
		t.Errorf("%d workers in a room of %d: %v", room+1, room, err)
	}
	if err := checkThreads(1<<30, "", nil); err != nil {
		t.Errorf("no limit: %v", err)
	}
}
