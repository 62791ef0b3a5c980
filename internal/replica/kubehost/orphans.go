package kubehost

// Publications of replicas that no longer exist. A VolumeReplica normally
// goes only after this host acknowledged its release, having closed the
// worker and unpublished the backing volume first (release.go). The volume
// controller waives that acknowledgement for a retired replica whose host
// is gone (docs/volume-controller.md, "Teardown"): when the host comes back
// the replica is gone from the API, no pass of it ever runs, and its backing
// volume stays published. The local driver refuses DeleteVolume of a
// published volume, so its PV and directory would stay for ever. So the
// host releases every publication it recorded (published.go) whose replica
// no longer exists, acknowledged or not: at start, every
// orphanSweepInterval, and when a pass finds its replica gone.
//
// Existence is asked of the API server, never the cache: only a definite
// NotFound, or a replica of that name with another UID, releases anything.
// Publication and unpublication hold the agent's publication lock, so a
// pass working from a cache that has not yet seen the deletion cannot
// publish between this unpublication and the record's removal.

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// orphanSweepInterval is how often the host looks for publications of
// replicas that no longer exist; a failed release is retried then.
const orphanSweepInterval = 30 * time.Second

// recordStanding is what the API says of a publication record's replica.
type recordStanding int

const (
	replicaExists     recordStanding = iota // the record's replica: keep it
	replicaGone                             // no replica of that name
	replicaSuperseded                       // a replica of that name, another UID
)

// sweepOrphans releases the publications of gone replicas until ctx ends
// (a manager Runnable).
func (a *Agent) sweepOrphans(ctx context.Context) error {
	t := time.NewTicker(orphanSweepInterval)
	defer t.Stop()
	for {
		if err := a.releaseOrphans(ctx, ""); err != nil && ctx.Err() == nil {
			a.log.Warn("publications of replicas that no longer exist not all released; retried later", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// releaseOrphans releases the recorded publications of replica (of every
// replica when "") whose replica no longer exists.
func (a *Agent) releaseOrphans(ctx context.Context, replica string) error {
	recs, err := a.recordedPublications()
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		if replica != "" && rec.Replica != replica {
			continue
		}
		st, err := a.standingOf(ctx, rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st == replicaExists {
			continue
		}
		if err := a.releaseOrphan(ctx, rec, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// standingOf reads the record's replica from the API server.
func (a *Agent) standingOf(ctx context.Context, rec publishedVolume) (recordStanding, error) {
	vr := &storagev1alpha1.VolumeReplica{}
	err := a.reader.Get(ctx, client.ObjectKey{Namespace: a.opts.Namespace, Name: rec.Replica}, vr)
	switch {
	case apierrors.IsNotFound(err):
		return replicaGone, nil
	case err != nil:
		return replicaExists, fmt.Errorf("read VolumeReplica %s of the publication of %s: %w", rec.Replica, rec.PV, err)
	case rec.ReplicaUID != "" && string(vr.UID) != rec.ReplicaUID:
		return replicaSuperseded, nil
	}
	return replicaExists, nil
}

// releaseOrphan closes the gone replica's worker, deletes the EndpointSlice
// this host wrote for it (the manager deletes the Service, and nothing else
// owns the slice), unpublishes its backing volume and forgets the record and
// the replica's credentials. A replica of the same name with another UID is
// a new replica on its own PV: its worker, slice and credentials are left
// alone.
func (a *Agent) releaseOrphan(ctx context.Context, rec publishedVolume, st recordStanding) error {
	if st == replicaGone {
		if err := a.closeWorkersOf(rec.Replica); err != nil {
			return err
		}
		if err := a.deleteSlice(ctx, a.opts.Namespace, rec.Replica); err != nil {
			return fmt.Errorf("release replica %s, which no longer exists: %w", rec.Replica, err)
		}
	}
	a.publishing.Lock()
	defer a.publishing.Unlock()
	if err := a.unpublishRecorded(ctx, rec.Replica, rec.PV, rec.VolumeID); err != nil {
		return fmt.Errorf("release the publication of replica %s, which no longer exists: %w", rec.Replica, err)
	}
	if st == replicaGone {
		if err := a.creds.forget(rec.Replica); err != nil {
			a.log.Warn("credentials of a replica that no longer exists not removed", "replica", rec.Replica, "error", err)
		}
	}
	a.log.Info("publication of a replica that no longer exists released", "replica", rec.Replica, "pv", rec.PV, "volumeID", rec.VolumeID)
	return nil
}

// closeWorkersOf closes every worker this host runs for the replica name,
// whichever pass started it: workers close before unpublication.
func (a *Agent) closeWorkersOf(name string) error {
	a.stop(name, a.opts.Namespace)
	for _, st := range a.host.Statuses() {
		if st.Replica != name {
			continue
		}
		k := st.Volume + "/" + st.Replica
		a.digest.forget(k)
		if err := a.host.Remove(k); err != nil {
			return fmt.Errorf("close worker %s of a replica that no longer exists: %w", k, err)
		}
	}
	return nil
}
