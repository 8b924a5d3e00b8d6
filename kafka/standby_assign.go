package kafka

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
func assignStandbys(members []string, owners map[int]string, n int, warm map[string]warmData) map[string][]int {
	out := map[string][]int{}
	if n <= 0 || len(members) == 0 {
		return out
	}
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
	quota := make(map[string]int, len(members))
	for i, m := range members {
		quota[m] = total / len(members)
		if i < total%len(members) {
			quota[m]++
		}
	}
	load := make(map[string]int, len(members))
	held := make(map[string]map[int]bool, len(members))
	for _, m := range members {
		held[m] = map[int]bool{}
	}
	add := func(m string, p int) { held[m][p] = true; load[m]++ }
	drop := func(m string, p int) { delete(held[m], p); load[m]-- }
	// eligible lists the members that may take a standby of p: not its
	// owner, not holding one already; warm holders first (most caught-up
	// first), then the least loaded, then in member order.
	eligible := func(p int) []string {
		var cands []string
		for _, m := range members {
			if m != owners[p] && !held[m][p] {
				cands = append(cands, m)
			}
		}
		slices.SortStableFunc(cands, func(a, b string) int {
			oa, aok := warm[a][p]
			ob, bok := warm[b][p]
			if !aok {
				oa = -1
			}
			if !bok {
				ob = -1
			}
			if c := cmp.Compare(ob, oa); c != 0 {
				return c
			}
			return cmp.Compare(load[a], load[b])
		})
		return cands
	}
	// place gives a standby of p to an eligible member with room, or makes
	// room: a full one takes p and hands one of its standbys on (an
	// augmenting path). seen stops the search from visiting a member twice.
	var place func(p int, seen map[string]bool) bool
	place = func(p int, seen map[string]bool) bool {
		cands := eligible(p)
		for _, m := range cands {
			if load[m] < quota[m] {
				add(m, p)
				return true
			}
		}
		for _, m := range cands {
			if seen[m] {
				continue
			}
			seen[m] = true
			for _, q := range ids {
				if !held[m][q] {
					continue
				}
				drop(m, q)
				add(m, p)
				if place(q, seen) {
					return true
				}
				drop(m, p)
				add(m, q)
			}
		}
		return false
	}
	for _, p := range ids {
		for range min(n, len(eligible(p))) {
			if !place(p, map[string]bool{}) {
				// Every share is full: the least loaded takes it.
				cands := eligible(p)
				m := slices.MinFunc(cands, func(a, b string) int { return cmp.Compare(load[a], load[b]) })
				add(m, p)
			}
		}
	}
	for _, p := range ids {
		for _, m := range members {
			if held[m][p] {
				out[m] = append(out[m], p)
			}
		}
	}
	return out
}
