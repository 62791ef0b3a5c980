package processtest

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

func TestRetriedMutationAfterCoordinatorChangeIsAppliedOnce(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "log")
	leader := c.waitLeader(10 * time.Second)
	const session = 0xC0FFEE
	r := c.raw(leader, c.token())
	if rep, err := r.recv(); err != nil || rep.Status != wire.StatusOK {
		t.Fatalf("hello: %v %v", rep.Status, err)
	}
	if rep := r.call(wire.Op{Kind: wire.KindRegister, Session: session}); rep.Status != wire.StatusOK {
		t.Fatalf("register session: %s %s", rep.Status, rep.Message)
	}
	appendOnce := wire.Op{Kind: wire.KindWrite, Session: session, Seq: 1, Acked: 1, Ino: ino,
		Flags: wire.WriteAppend, Data: []byte("once\n")}
	first := r.call(appendOnce)
	if first.Status != wire.StatusOK || first.Results[0].Errno != 0 {
		t.Fatalf("first append: %s %s", first.Status, first.Message)
	}
	// The reply is treated as lost: the same operation is retried at the
	// same coordinator, then at a new one after kill -9.
	if again := r.call(appendOnce); !reflect.DeepEqual(again.Results, first.Results) {
		t.Fatalf("a retry at the same coordinator returned %+v, want the first result %+v", again.Results, first.Results)
	}
	c.Kill(leader)
	next := c.waitLeader(20 * time.Second)
	r2 := c.raw(next, c.token())
	if rep, err := r2.recv(); err != nil || rep.Status != wire.StatusOK {
		t.Fatalf("hello at the new coordinator: %v %v", rep.Status, err)
	}
	var retried wire.Reply
	poll.Until(t, 10*time.Second, "the new coordinator answers the retry", func() error {
		retried = r2.call(appendOnce)
		if retried.Status != wire.StatusOK {
			return errString(retried.Status.String() + ": " + retried.Message)
		}
		return nil
	})
	if !reflect.DeepEqual(retried.Results, first.Results) {
		t.Fatalf("the retry after a coordinator change returned %+v, want the first result %+v", retried.Results, first.Results)
	}
	if got := readAll(t, cl, ino); !bytes.Equal(got, []byte("once\n")) {
		t.Fatalf("file holds %q after three deliveries of one append: the retry was applied more than once", got)
	}
	appendOnce.Seq, appendOnce.Acked = 2, 2
	if rep := r2.call(appendOnce); rep.Status != wire.StatusOK || rep.Results[0].N != 5 {
		t.Fatalf("a new sequence must apply: %s %+v", rep.Status, rep.Results)
	}
	if got := readAll(t, cl, ino); !bytes.Equal(got, []byte("once\nonce\n")) {
		t.Fatalf("file holds %q, want two records", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
