package balance

import (
	"cmp"
	"slices"
)

// assignStandbys picks, for each partition of owners (partition → its
// owner), up to n standbys among members (sorted: those that keep
// standbys), never its owner and never one member twice. Each member's
// share of all the standbys is even (the range assignor's counts over the
// total); within it, a partition's standbys are preferably the members
// that hold it warm, most caught-up first, so that a standby stays where
// its store already is from one generation to the next. A member whose
// share is full may take a standby and hand one of its own on to another
// member (an augmenting path), so that the shares fill evenly; only when
// that fails does the least loaded member that may take it go over.
// It returns each member's standby partitions, sorted.
func assignStandbys(members []string, owners map[int]string, n int, warm map[string]Warm) map[string][]int {
	out := map[string][]int{}
	if n <= 0 || len(members) == 0 {
		return out
	}
	a := newStandbyAssignment(members, owners, n, warm)
	for _, p := range a.ids {
		for range min(n, len(a.eligible(p))) {
			if !a.place(p, map[string]bool{}) {
				// Every share is full: the least loaded takes it.
				cands := a.eligible(p)
				m := slices.MinFunc(cands, func(x, y string) int { return cmp.Compare(a.load[x], a.load[y]) })
				a.add(m, p)
			}
		}
	}
	for _, p := range a.ids {
		for _, m := range members {
			if a.held[m][p] {
				out[m] = append(out[m], p)
			}
		}
	}
	return out
}

// standbyAssignment is an assignment of standbys under way.
type standbyAssignment struct {
	members []string
	owners  map[int]string
	warm    map[string]Warm
	ids     []int                   // the partitions, sorted
	quota   map[string]int          // each member's share
	load    map[string]int          // the standbys placed on each member
	held    map[string]map[int]bool // each member's standbys
}

// newStandbyAssignment starts an assignment with empty members whose
// shares add up to every partition's standbys: n, or fewer when there are
// not that many members besides its owner.
func newStandbyAssignment(members []string, owners map[int]string, n int, warm map[string]Warm) *standbyAssignment {
	ids := make([]int, 0, len(owners))
	total := 0
	for p, owner := range owners {
		ids = append(ids, p)
		others := len(members)
		if slices.Contains(members, owner) {
			others--
		}
		total += min(n, others)
	}
	slices.Sort(ids)
	a := &standbyAssignment{members: members, owners: owners, warm: warm, ids: ids,
		quota: quotas(members, total),
		load:  make(map[string]int, len(members)),
		held:  make(map[string]map[int]bool, len(members)),
	}
	for _, m := range members {
		a.held[m] = map[int]bool{}
	}
	return a
}

func (a *standbyAssignment) add(m string, p int)  { a.held[m][p] = true; a.load[m]++ }
func (a *standbyAssignment) drop(m string, p int) { delete(a.held[m], p); a.load[m]-- }

// eligible lists the members that may take a standby of p: not its
// owner, not holding one already; warm holders first (most caught-up
// first), then the least loaded, then in member order.
func (a *standbyAssignment) eligible(p int) []string {
	var cands []string
	for _, m := range a.members {
		if m != a.owners[p] && !a.held[m][p] {
			cands = append(cands, m)
		}
	}
	slices.SortStableFunc(cands, func(x, y string) int {
		ox, xok := a.warm[x][p]
		oy, yok := a.warm[y][p]
		if !xok {
			ox = -1
		}
		if !yok {
			oy = -1
		}
		if c := cmp.Compare(oy, ox); c != 0 {
			return c
		}
		return cmp.Compare(a.load[x], a.load[y])
	})
	return cands
}

// place gives a standby of p to an eligible member with room, or makes
// room: a full one takes p and hands one of its standbys on (an
// augmenting path). seen stops the search from visiting a member twice.
func (a *standbyAssignment) place(p int, seen map[string]bool) bool {
	cands := a.eligible(p)
	for _, m := range cands {
		if a.load[m] < a.quota[m] {
			a.add(m, p)
			return true
		}
	}
	for _, m := range cands {
		if seen[m] {
			continue
		}
		seen[m] = true
		for _, q := range a.ids {
			if !a.held[m][q] {
				continue
			}
			a.drop(m, q)
			a.add(m, p)
			if a.place(q, seen) {
				return true
			}
			a.drop(m, p)
			a.add(m, q)
		}
	}
	return false
}
