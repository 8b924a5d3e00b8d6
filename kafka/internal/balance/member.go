package balance

import "encoding/json"

// Protocol is the assignor's protocol name; every member of a group must
// speak it.
const Protocol = "outbox-warm"

// Warm maps a partition to the changelog offset of its checkpoint.
type Warm map[int]int64

// MemberData is what a member tells the group when it joins (its
// UserData, as JSON): the partitions it holds warm and where its API is.
// Decoders accept the older form, a bare Warm object, and ignore fields
// they do not know, so members of different versions can share a group.
type MemberData struct {
	// Warm holds the partitions with a checkpointed store.
	Warm Warm `json:"warm"`
	// API is the base URL of the member's HTTP API, "" when it announces
	// none.
	API string `json:"api,omitempty"`
}

// DecodeMemberData decodes a member's UserData; anything unusable holds
// nothing warm and announces no API.
func DecodeMemberData(b []byte) MemberData {
	var m MemberData
	if json.Unmarshal(b, &m) == nil && (m.Warm != nil || m.API != "") {
		return m
	}
	var w Warm
	if json.Unmarshal(b, &w) == nil {
		return MemberData{Warm: w}
	}
	return MemberData{}
}
