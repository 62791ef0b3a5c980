package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDeletionsKeepsOnlyCompletedSuccessfulDeletesSinceTheStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	line := func(stage, verb, user, resource, name string, code int, at string) string {
		return `{"stage":"` + stage + `","verb":"` + verb + `","user":{"username":"` + user + `"},` +
			`"objectRef":{"resource":"` + resource + `","namespace":"celld","name":"` + name + `"},` +
			`"responseStatus":{"code":` + strconv.Itoa(code) + `},"stageTimestamp":"` + at + `"}`
	}
	op := "system:serviceaccount:cellfleet-system:cellfleet-manager"
	log := strings.Join([]string{
		line("ResponseComplete", "delete", op, "pods", "before-start", 200, "2026-01-01T09:59:59Z"),
		line("ResponseComplete", "delete", op, "pods", "f-1", 200, "2026-01-01T10:00:01Z"),
		line("ResponseStarted", "delete", op, "pods", "f-started-only", 200, "2026-01-01T10:00:02Z"),
		line("ResponseComplete", "delete", op, "persistentvolumeclaims", "data-f-1-conflict", 409, "2026-01-01T10:00:03Z"),
		line("ResponseComplete", "get", op, "pods", "f-read", 200, "2026-01-01T10:00:04Z"),
		"not json",
		line("ResponseComplete", "delete", "admin", "persistentvolumeclaims", "data-f-2", 200, "2026-01-01T10:00:05Z"),
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "logs", "audit.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{AuditLog: filepath.Join(dir, "logs", "audit.log")}
	got, err := c.Deletions(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range got {
		names = append(names, d.User+":"+d.Resource+"/"+d.Name)
	}
	want := []string{op + ":pods/f-1", "admin:persistentvolumeclaims/data-f-2"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("deletions = %v, want only the completed, successful deletes after the start: %v", names, want)
	}
}
