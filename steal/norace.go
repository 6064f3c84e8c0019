//go:build !race

package steal

// shuffleHard is off in normal builds: see race.go.
const shuffleHard = false
