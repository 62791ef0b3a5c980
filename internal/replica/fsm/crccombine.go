package fsm

import "hash/crc32"

// crc32Combine returns the CRC-32C of A followed by B from crcA, crcB and
// B's length, without B's bytes: zlib's crc32_combine (GF(2) matrices
// squared once per bit of the length), for the Castagnoli polynomial. The
// kept checksums use it to fold in writes that reached the file ahead of
// the bytes before them (seqsum.go). hash/crc32 does not export it.
func crc32Combine(crcA, crcB uint32, lenB uint64) uint32 {
	if lenB == 0 {
		return crcA
	}
	// odd: the operator for one zero bit; even, odd then alternate as the
	// operators for 2^k zero bits.
	var even, odd [32]uint32
	odd[0] = crc32.Castagnoli // bit-reversed, as hash/crc32 applies it
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // one zero byte, then 4, 16, ...
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
