package snapshot

// maxEdit bounds the edit distance the line diff searches for between the
// differing middles of two files; past it the middle is replaced whole,
// which is still a correct diff, only a longer one. It keeps the search's
// memory (about maxEdit² words) bounded for any input.
const maxEdit = 2000

// op is one line of an edit script.
type op struct {
	kind byte // ' ' kept, '-' deleted from a, '+' inserted from b
	a, b int  // line index in a (kept, deleted) and in b (kept, inserted)
}

// diffLines returns an edit script turning a into b: every line of a kept
// or deleted, every line of b kept or inserted, in order. It trims the
// common head and tail, then runs Myers' O(ND) search on the rest.
func diffLines(a, b []string) []op {
	var ops []op
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		ops = append(ops, op{' ', head, head})
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	for _, o := range myers(intern(ma, mb)) {
		o.a += head
		o.b += head
		ops = append(ops, o)
	}
	for i := range tail {
		ops = append(ops, op{' ', len(a) - tail + i, len(b) - tail + i})
	}
	return ops
}

// intern maps the lines of a and b to small integers, equal lines to equal
// numbers, so the search compares numbers.
func intern(a, b []string) ([]int, []int) {
	ids := map[string]int{}
	conv := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	return conv(a), conv(b)
}

// myers returns a shortest edit script from a to b, or, when the edit
// distance exceeds maxEdit, one that deletes all of a and inserts all of b.
func myers(a, b []int) []op {
	n, m := len(a), len(b)
	whole := func() []op {
		ops := make([]op, 0, n+m)
		for i := range n {
			ops = append(ops, op{'-', i, 0})
		}
		for j := range m {
			ops = append(ops, op{'+', n, j})
		}
		return ops
	}
	if n == 0 || m == 0 {
		return whole()
	}
	limit := min(n+m, maxEdit)
	off := limit + 1
	v := make([]int32, 2*limit+3)
	// trace[d] holds v for diagonals -d..d as it stood after round d.
	var trace [][]int32
	found := -1
	for d := 0; d <= limit && found < 0; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				found = d
				break
			}
		}
		snap := make([]int32, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
	}
	if found < 0 {
		return whole()
	}
	// Walk back from (n, m) through the rounds, collecting the script in
	// reverse: each round is one move (a deletion or an insertion) followed
	// by a snake of kept lines.
	var rev []op
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d-1] // diagonals -(d-1)..d-1 at index k+d-1
		k := x - y
		var pk int
		if k == -d || (k != d && prev[k-1+d-1] < prev[k+1+d-1]) {
			pk = k + 1 // moved down: a line of b inserted
		} else {
			pk = k - 1 // moved right: a line of a deleted
		}
		px := int(prev[pk+d-1])
		py := px - pk
		mx := px // where the move ended
		if pk == k-1 {
			mx = px + 1
		}
		for x > mx {
			x--
			y--
			rev = append(rev, op{' ', x, y})
		}
		if pk == k+1 {
			rev = append(rev, op{'+', px, py})
		} else {
			rev = append(rev, op{'-', px, py})
		}
		x, y = px, py
	}
	for x > 0 {
		x--
		y--
		rev = append(rev, op{' ', x, y})
	}
	ops := make([]op, len(rev))
	for i, o := range rev {
		ops[len(rev)-1-i] = o
	}
	return ops
}
