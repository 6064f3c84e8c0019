//go:build race

package queue

// raceEnabled: built with -race.
const raceEnabled = true
