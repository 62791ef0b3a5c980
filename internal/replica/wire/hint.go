package wire

import "strings"

// A not-coordinator reply names the coordinator so the client can go there
// directly. A replaced replica has an ID and address the mount was never
// configured with, so to follow it the client also needs the TLS server
// name to verify the coordinator's certificate against: without it, the
// hint could only be followed to endpoints the client already knew.
//
// The server name travels inside the reply's existing leader-address field,
// in the Raft address form "server-name@host:port" the workers already use
// among themselves. That keeps the frame layout unchanged, so both
// directions of a mixed-version volume keep working: clients before this
// change never read the address field at all, and a worker before it sends
// the bare "host:port", which decodes with no server name (the client then
// follows only endpoints it knows, as before).

// hintSeparator splits the server name from the dial address.
const hintSeparator = "@"

// leaderAddrField is the leader-address field as encoded.
func (r *Reply) leaderAddrField() string {
	if r.LeaderServerName == "" || r.LeaderAddr == "" {
		return r.LeaderAddr
	}
	joined := r.LeaderServerName + hintSeparator + r.LeaderAddr
	if len(joined) > MaxName {
		// Every decoder bounds the field at MaxName, older ones too: a
		// longer field would make the whole reply undecodable. The bare
		// address still serves clients that know the coordinator.
		return r.LeaderAddr
	}
	return joined
}

// setLeaderAddrField decodes the leader-address field.
func (r *Reply) setLeaderAddrField(f string) {
	if san, dial, ok := strings.Cut(f, hintSeparator); ok && san != "" && dial != "" {
		r.LeaderServerName, r.LeaderAddr = san, dial
		return
	}
	r.LeaderAddr = f
}
