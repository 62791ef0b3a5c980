package store

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReopenReplaysEveryAppendedRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{{"a", "1"}, {"b", "2"}, {"c", ""}} {
		if err := s.Put(r); err != nil {
			t.Fatalf("put %q: %v", r.Key, err)
		}
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Len(); got != 3 {
		t.Fatalf("reopened log holds %d records, want the 3 appended", got)
	}
	if v, ok := s.Get("b"); !ok || v != "2" {
		t.Fatalf("record b reads back as %q (held %v), want \"2\"", v, ok)
	}
}

func TestTornTailIsTruncatedAndLaterAppendsSurvive(t *testing.T) {
	cases := []struct {
		name string
		tail []byte
	}{
		{"half a header", []byte{9, 0, 0}},
		{"header without payload", []byte{20, 0, 0, 0, 1, 2, 3, 4, '{'}},
		{"bad checksum", append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, '{', '}')},
		{"absurd length", []byte{255, 255, 255, 127, 0, 0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(Record{"kept", "v"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			f, err := os.OpenFile(filepath.Join(dir, LogName), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tc.tail)
			f.Close()

			s, err = Open(dir)
			if err != nil {
				t.Fatalf("open with a torn tail: %v", err)
			}
			if err := s.Put(Record{"after", "w"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err = Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, k := range []string{"kept", "after"} {
				if _, ok := s.Get(k); !ok {
					t.Errorf("record %q lost after a torn tail was truncated", k)
				}
			}
		})
	}
}

func TestRewritingAKeyWithAnotherValueIsRefused(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(Record{"k", "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{"k", "v1"}); err != nil {
		t.Fatalf("an identical rewrite must be accepted as a no-op: %v", err)
	}
	if err := s.Put(Record{"k", "v2"}); err == nil {
		t.Fatal("a record was overwritten with another value: records are immutable")
	}
}

func TestInvalidRecordsAreRejected(t *testing.T) {
	cases := map[string]Record{
		"empty key":      {Key: "", Value: "x"},
		"key too long":   {Key: string(make([]byte, MaxKeyLen+1)), Value: "x"},
		"value too long": {Key: "k", Value: string(make([]byte, MaxValueLen+1))},
	}
	for name, r := range cases {
		if Validate(r) == nil {
			t.Errorf("%s: accepted, want rejected", name)
		}
	}
}

func TestPutAllStoresABatchDurablyAndRefusesAConflictingOneWhole(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{"held", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAll([]Record{{"held", "1"}, {"x", "2"}, {"y", "3"}}); err != nil {
		t.Fatalf("a batch overlapping identical held records must be accepted: %v", err)
	}
	if err := s.PutAll([]Record{{"z", "4"}, {"held", "other"}}); err == nil {
		t.Fatal("a batch rewriting a held record with another value was accepted")
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Get("z"); ok {
		t.Error("a refused batch left part of itself on disk")
	}
	for k, want := range map[string]string{"held": "1", "x": "2", "y": "3"} {
		if v, _ := s.Get(k); v != want {
			t.Errorf("after reopen %s = %q, want %q", k, v, want)
		}
	}
}
