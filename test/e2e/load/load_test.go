package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeFleet stores what it acknowledges, refuses every third write, and can
// forget a key (a lost write).
type fakeFleet struct {
	mu   sync.Mutex
	data map[string]string
	n    int
}

func (f *fakeFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/records/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		f.n++
		if f.n%3 == 0 {
			http.Error(w, "refused", http.StatusServiceUnavailable)
			return
		}
		b := new(strings.Builder)
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		f.data[key] = b.String()
	case http.MethodGet:
		v, ok := f.data[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(v))
	}
}

func TestLedgerHoldsOnlyAcknowledgedWritesAndVerifyFindsALostOne(t *testing.T) {
	fleet := &fakeFleet{data: map[string]string{}}
	srv := httptest.NewServer(fleet)
	defer srv.Close()

	ledger := NewLedger()
	g := Start(Target{Base: srv.URL}, "t", ledger, Options{Writers: 2, Pause: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.WaitAcknowledged(ctx, 30); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	st := g.Stats()
	if st.Refused == 0 || st.Acknowledged+st.Refused != st.Attempted {
		t.Fatalf("stats %+v: every attempt must be either acknowledged or refused, and the fake refuses some", st)
	}
	fleet.mu.Lock()
	stored := len(fleet.data)
	fleet.mu.Unlock()
	// Stop may cut a write whose request the fleet stored before its reply
	// arrived (a lost response: not acknowledged, so not in the ledger), at
	// most one per writer; a refused write must never enter the ledger.
	if ledger.Len() > stored || stored-ledger.Len() > 2 {
		t.Fatalf("ledger holds %d writes, the fleet stored %d: refused writes must not enter the ledger, and at most one unanswered write per writer may be missing from it", ledger.Len(), stored)
	}

	verified, lost := Verify(ctx, Target{Base: srv.URL}, ledger, 2)
	if verified != ledger.Len() || len(lost) != 0 {
		t.Fatalf("verify of an intact fleet: %d verified of %d, lost %v", verified, ledger.Len(), lost)
	}

	victim := ledger.Entries()[3][0]
	fleet.mu.Lock()
	delete(fleet.data, victim)
	fleet.mu.Unlock()
	verified, lost = Verify(ctx, Target{Base: srv.URL}, ledger, 2)
	if len(lost) != 1 || lost[0].Key != victim || verified != ledger.Len()-1 {
		t.Fatalf("verify after losing %s: verified %d, lost %v; want exactly that write reported lost", victim, verified, lost)
	}
}
