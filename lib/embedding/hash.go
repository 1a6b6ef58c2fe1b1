package embedding

// Feature hashing. Every feature is reduced to a 64-bit hash: the low bits
// pick a bucket, the top bit a sign, so colliding features cancel out on
// average instead of piling up. The functions are fixed (FNV-1a plus the
// SplitMix64 finaliser) rather than hash/maphash, whose seeds are random
// per process: vectors must be the same on every machine and every run.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Seeds keep the feature blocks apart: the word "log" and the character
// trigram "log" must not land in the same bucket by construction.
const (
	seedUnigram = 0x6a09e667f3bcc908
	seedBigram  = 0xbb67ae8584caa73b
	seedChar    = 0x3c6ef372fe94f82b
)

// hashBytes returns the FNV-1a hash of b.
func hashBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// hashString returns the FNV-1a hash of s; it equals hashBytes([]byte(s)).
func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix is the SplitMix64 finaliser: it spreads every input bit over the
// whole word, so bucket and sign bits are independent.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// combine hashes an ordered pair; combine(a, b) != combine(b, a).
func combine(a, b uint64) uint64 {
	return mix(a*0x9e3779b97f4a7c15 ^ b)
}
