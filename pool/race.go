//go:build race

package pool

// raceEnabled: built with -race.
const raceEnabled = true
