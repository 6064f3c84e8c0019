package steal

// Rand is a worker's own random source: xorshift64* (Vigna), with
// Lemire's multiply-shift to map a draw onto [0, n) without division.
// It is not safe for concurrent use; each worker has its own, so no RNG
// state is shared between cores. The zero value is usable.
type Rand struct {
	s uint64
}

// NewRand returns a source seeded with seed (any value; 0 is replaced).
func NewRand(seed uint64) Rand {
	// splitmix64 spreads nearby seeds (worker indexes) apart.
	seed += 0x9e3779b97f4a7c15
	z := seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 0x9e3779b97f4a7c15
	}
	return Rand{s: z}
}

// Uint32 returns a pseudo-random 32-bit value.
func (r *Rand) Uint32() uint32 {
	if r.s == 0 {
		*r = NewRand(0)
	}
	r.s ^= r.s >> 12
	r.s ^= r.s << 25
	r.s ^= r.s >> 27
	return uint32((r.s * 0x2545f4914f6cdd1d) >> 32)
}

// Intn returns a value in [0, n); n must be positive and fit in 32 bits.
// Lemire's multiply-shift: the high half of a 32x32 product is uniform
// enough on [0, n) for victim selection (bias below n/2^32).
func (r *Rand) Intn(n int) int {
	return int((uint64(r.Uint32()) * uint64(uint32(n))) >> 32)
}
