//go:build race

package steal

// shuffleHard is on under the race detector: victim orders are full
// random permutations instead of rotations from a random start, to shake
// out order assumptions in tests (as the runtime's randomizeScheduler).
const shuffleHard = true
