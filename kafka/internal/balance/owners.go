package balance

import "slices"

// assignWarm assigns ids to members (sorted): the first len(ids)%len(members)
// members get one more than the others, as the range assignor's counts.
// Within those counts as many partitions as possible go to a member that
// holds them warm: each partition in turn goes to its most caught-up
// holder with room, and when every holder is full, one of a full holder's
// partitions moves to another holder of its own with room (an augmenting
// path, so that taking a warm partition never costs another its warm
// home). The rest go in order to the members with room.
func assignWarm(members []string, ids []int, warm map[string]Warm) map[string][]int {
	a := &ownerAssignment{
		ids:     ids,
		quota:   quotas(members, len(ids)),
		holders: holdersOf(members, ids, warm),
		owner:   make(map[int]string, len(ids)),
		load:    make(map[string]int, len(members)),
	}
	var rest []int
	for _, p := range ids {
		if !a.place(p, map[string]bool{}) {
			rest = append(rest, p)
		}
	}
	for _, p := range rest {
		for _, m := range members {
			if a.load[m] < a.quota[m] {
				a.owner[p] = m
				a.load[m]++
				break
			}
		}
	}
	out := make(map[string][]int, len(members))
	for _, p := range ids {
		if m, ok := a.owner[p]; ok {
			out[m] = append(out[m], p)
		}
	}
	return out
}

// ownerAssignment is an assignment of owners under way.
type ownerAssignment struct {
	ids     []int
	quota   map[string]int   // each member's share
	holders map[int][]string // the members holding p warm, most caught-up first
	owner   map[int]string   // each placed partition's owner
	load    map[string]int   // the partitions placed on each member
}

// holdersOf returns, for each of ids, the members holding it warm, most
// caught-up first (in member order among equals).
func holdersOf(members []string, ids []int, warm map[string]Warm) map[int][]string {
	holders := make(map[int][]string, len(ids))
	for _, p := range ids {
		for _, m := range members {
			if _, ok := warm[m][p]; ok {
				holders[p] = append(holders[p], m)
			}
		}
		slices.SortStableFunc(holders[p], func(a, b string) int {
			oa, ob := warm[a][p], warm[b][p]
			switch {
			case oa > ob:
				return -1
			case oa < ob:
				return 1
			}
			return 0
		})
	}
	return holders
}

// place gives p to a holder with room, freeing one by moving one of its
// partitions along to another of that partition's holders if need be.
// seen stops the search from visiting a member twice.
func (a *ownerAssignment) place(p int, seen map[string]bool) bool {
	for _, m := range a.holders[p] {
		if a.load[m] < a.quota[m] {
			a.owner[p] = m
			a.load[m]++
			return true
		}
	}
	for _, m := range a.holders[p] {
		if seen[m] {
			continue
		}
		seen[m] = true
		for _, q := range a.ids {
			if a.owner[q] != m {
				continue
			}
			a.owner[p] = m // m keeps its load: p in, q out
			delete(a.owner, q)
			if a.place(q, seen) {
				return true
			}
			a.owner[q] = m
			delete(a.owner, p)
		}
	}
	return false
}
