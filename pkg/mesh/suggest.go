package mesh

// Suggest returns the candidate closest to word, for a "did you mean". It is
// at most two edits away, or word is a prefix of it. It returns "" when none
// is.
func Suggest(word string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if c == word {
			continue
		}
		d := editDistance(word, c)
		if d < bestDist || d == bestDist && best != "" && c < best {
			best, bestDist = c, d
		}
	}
	if best == "" {
		for _, c := range candidates {
			if len(word) >= 3 && len(c) > len(word) && c[:len(word)] == word {
				return c
			}
		}
	}
	return best
}

// Near returns the candidate that word is a slip of the fingers from, or ""
// when none is. A slip is two neighbours swapped ("wbe" for "web"), or a
// letter doubled or dropped ("webb", "wb"). A letter changed is not a slip.
// As often, it is a name of its own, such as api beside app or web-1 beside
// web-2.
func Near(word string, candidates []string) string {
	for _, c := range candidates {
		if c == word || editDistance(word, c) != 1 {
			continue
		}
		if len(c) != len(word) && (len(c) >= 3 || len(word) >= 3) {
			return c // a letter added or dropped
		}
		if len(c) == len(word) && swapped(word, c) {
			return c
		}
	}
	return ""
}

// swapped reports whether a and b differ by two neighbouring letters swapped.
func swapped(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	for i := range ra {
		if ra[i] != rb[i] {
			return i+1 < len(ra) && ra[i] == rb[i+1] && ra[i+1] == rb[i] && string(ra[i+2:]) == string(rb[i+2:])
		}
	}
	return false
}

// editDistance is the Levenshtein distance between a and b. A swap of two
// neighbouring characters counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
