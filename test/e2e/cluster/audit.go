package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Deletion is one delete the API server accepted, from its audit log
// (cluster-up.sh logs every delete of Pods, claims, volumes, workloads,
// Services, budgets, fleets and storage reservations).
type Deletion struct {
	User      string
	Resource  string // pods, persistentvolumeclaims, statefulsets, ...
	Namespace string
	Name      string
	Code      int
	At        time.Time
}

func (d Deletion) String() string {
	return fmt.Sprintf("%s %s/%s by %s at %s (HTTP %d)", d.Resource, d.Namespace, d.Name, d.User, d.At.Format(time.TimeOnly), d.Code)
}

type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// Deletions returns the successful deletes completed at or after since, in
// log order.
func (c *Cluster) Deletions(since time.Time) ([]Deletion, error) {
	path := c.AuditLog
	if path == "" {
		return nil, fmt.Errorf("no audit log on this cluster (set %s)", EnvAuditLog)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	defer f.Close()
	var out []Deletion
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if e.Stage != "ResponseComplete" || (e.Verb != "delete" && e.Verb != "deletecollection") {
			continue
		}
		if e.ResponseStatus.Code >= 300 || e.StageTimestamp.Before(since) {
			continue
		}
		out = append(out, Deletion{User: e.User.Username, Resource: e.ObjectRef.Resource,
			Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name, Code: e.ResponseStatus.Code, At: e.StageTimestamp})
	}
	return out, sc.Err()
}
