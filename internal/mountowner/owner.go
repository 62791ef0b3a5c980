// Package mountowner is the long-lived mount owner process: it holds the FUSE
// sessions of the replicated volumes on a node, serves mount, unmount and
// list on a unix socket (protocol in the api sub-package), keeps a durable
// record of every session written before the mount is made, and on start
// cleans the mounts a dead predecessor left (ENOTCONN), reporting them as
// Lost. A socket client dying mid-call never affects a mount: mounting runs
// on the owner's own context.
//
// mountowner must never import the worker, the state machine, raft or
// anything Kubernetes.
package mountowner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// Config configures an owner.
type Config struct {
	// StateDir holds the session records and the owner's lock.
	StateDir string
	// NodeName keys the mounts' orphan names (see internal/fuse).
	NodeName string
	// MountTimeout bounds connecting to a volume and mounting it.
	MountTimeout time.Duration
	Logger       *slog.Logger
}

// Owner holds the node's FUSE sessions.
type Owner struct {
	cfg  Config
	log  *slog.Logger
	recs records
	lock *os.File

	mu       sync.Mutex
	sessions map[string]*session    // by volume ID
	volLocks map[string]*sync.Mutex // serialises operations per volume
}

type session struct {
	rec   api.Session
	mount *fuse.Mount // nil unless Mounted
}

// New opens the state directory, takes the owner lock (one owner per state
// directory) and cleans the mounts a previous owner left.
func New(cfg Config) (*Owner, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("mount owner: state directory is required")
	}
	if cfg.MountTimeout <= 0 {
		cfg.MountTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir := filepath.Join(cfg.StateDir, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mount owner state: %w", err)
	}
	// The records directory's own entry must be durable before a record in
	// it is acknowledged, or a power cut loses every record at once.
	if err := durable.SyncDir(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("mount owner state: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.StateDir, "owner.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mount owner lock: %w", err)
	}
	recs := records{dir: dir}
	if err := takeLock(lock, recs, cfg.Logger); err != nil {
		lock.Close()
		return nil, fmt.Errorf("another mount owner holds %s: %w", cfg.StateDir, err)
	}
	o := &Owner{cfg: cfg, log: cfg.Logger, recs: recs, lock: lock,
		sessions: map[string]*session{}, volLocks: map[string]*sync.Mutex{}}
	if err := o.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	return o, nil
}

// takeLock takes the owner lock. A previous owner that was killed while one
// of its threads was stuck in the kernel still holds it, and only aborting
// its FUSE connections lets that thread, and so the process, end
// (abort.go): so when the holder is dying, the connections of the mounts
// the records name are aborted and the lock is awaited for a while.
func takeLock(lock *os.File, recs records, log *slog.Logger) error {
	err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return err
	}
	pid, dying, derr := dyingLockHolder(lock.Name())
	if derr != nil || !dying {
		return errors.Join(err, derr)
	}
	log.Warn("the previous mount owner is dying with a thread stuck in the kernel; aborting its FUSE connections", "pid", pid)
	saved, lerr := recs.load()
	if lerr != nil {
		log.Error("some session records could not be read", "error", lerr)
	}
	for _, rec := range saved {
		if _, aerr := abortConnection(rec.Target); aerr != nil {
			log.Error("could not abort a FUSE connection of the dying owner", "target", rec.Target, "error", aerr)
		}
	}
	deadline := time.Now().Add(dyingOwnerWait)
	for {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dyingOwnerWait bounds the wait for a dying owner to release the lock once
// its connections are aborted.
const dyingOwnerWait = 15 * time.Second

// recover turns every record into a Lost session, cleaning its target:
// whatever mount a record names belonged to a process that is gone.
func (o *Owner) recover() error {
	recs, err := o.recs.load()
	if err != nil {
		o.log.Error("some session records could not be read", "error", err)
	}
	for _, rec := range recs {
		log := o.log.With("volume", rec.VolumeID, "target", rec.Target)
		// The process that served this mount is gone, or hangs where a kill
		// cannot reach it (abort.go): end its connection before probing,
		// which would otherwise hang too.
		if aborted, err := abortConnection(rec.Target); err != nil {
			log.Error("the dead owner's FUSE connection could not be aborted", "error", err)
		} else if aborted {
			log.Warn("aborted the dead owner's FUSE connection")
		}
		state, perr := probe(rec.Target)
		reason := ""
		switch state {
		case targetStale:
			if err := detach(rec.Target); err != nil {
				log.Error("stale mount could not be unmounted", "error", err)
				reason = "OwnerDied: the mount's owner exited; unmounting the stale mount failed: " + err.Error()
			} else {
				reason = "OwnerDied: the mount's owner exited; the stale mount was unmounted"
			}
		case targetMounted:
			// Mounted and answering, yet no live owner holds it: not ours
			// to serve. Detach it so the target is clean for a new mount.
			if err := detach(rec.Target); err != nil {
				reason = "OwnerDied: a mount without owner could not be unmounted: " + err.Error()
			} else {
				reason = "OwnerDied: a mount without owner was unmounted"
			}
		case targetPlain, targetAbsent:
			reason = "NotMounted: the target was not mounted when the owner started"
		default:
			reason = fmt.Sprintf("TargetUnusable: %v", perr)
		}
		if rec.State == api.StateLost && rec.Reason != "" && state != targetStale && state != targetMounted {
			reason = rec.Reason // already reported by an earlier start
		}
		rec.State, rec.Reason, rec.OwnerPID, rec.UpdatedAt = api.StateLost, reason, os.Getpid(), time.Now().UTC()
		if err := o.recs.write(rec); err != nil {
			return err
		}
		o.sessions[rec.VolumeID] = &session{rec: rec}
		log.Warn("session of a previous mount owner is lost", "reason", reason)
	}
	return nil
}

func (o *Owner) volumeLock(volume string) *sync.Mutex {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.volLocks[volume]
	if l == nil {
		l = &sync.Mutex{}
		o.volLocks[volume] = l
	}
	return l
}

// List returns every session, sorted by volume.
func (o *Owner) List() []api.Session {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]api.Session, 0, len(o.sessions))
	for _, s := range o.sessions {
		out = append(out, s.rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VolumeID < out[j].VolumeID })
	return out
}

func (o *Owner) get(volume string) *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sessions[volume]
}

func (o *Owner) put(volume string, s *session) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s == nil {
		delete(o.sessions, volume)
		return
	}
	o.sessions[volume] = s
}

// byTarget finds the session mounted at target.
func (o *Owner) byTarget(target string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for v, s := range o.sessions {
		if s.rec.Target == target {
			return v, true
		}
	}
	return "", false
}

// Mount mounts a volume. It runs on the owner's context: the caller going
// away does not stop it half way.
func (o *Owner) Mount(req api.MountRequest) (api.Session, error) {
	if err := req.Validate(); err != nil {
		return api.Session{}, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	l := o.volumeLock(req.VolumeID)
	l.Lock()
	defer l.Unlock()
	log := o.log.With("volume", req.VolumeID, "target", req.Target)
	if s := o.get(req.VolumeID); s != nil && s.rec.State == api.StateMounted {
		if s.rec.Target == req.Target {
			return s.rec, nil
		}
		return api.Session{}, &api.Error{Code: api.CodeAlreadyMounted,
			Message: fmt.Sprintf("volume %s is mounted at %s", req.VolumeID, s.rec.Target)}
	}
	if v, ok := o.byTarget(req.Target); ok && v != req.VolumeID && o.get(v).rec.State == api.StateMounted {
		return api.Session{}, &api.Error{Code: api.CodeTargetBusy, Message: fmt.Sprintf("volume %s is mounted at %s", v, req.Target)}
	}
	if err := o.prepareTarget(req.Target); err != nil {
		return api.Session{}, err
	}
	rec := api.Session{VolumeID: req.VolumeID, Target: req.Target, State: api.StateMounting,
		Endpoints: req.Endpoints, CapacityBytes: req.CapacityBytes, SingleWriter: req.SingleWriter,
		ReadOnly: req.ReadOnly, OwnerPID: os.Getpid(), UpdatedAt: time.Now().UTC()}
	// The record reaches the disk before the mount exists.
	if err := o.recs.write(rec); err != nil {
		return api.Session{}, &api.Error{Code: api.CodeInternal, Message: err.Error()}
	}
	m, err := o.mountVolume(req)
	if err != nil {
		log.Error("mount failed", "error", err)
		_ = o.recs.remove(req.VolumeID)
		o.put(req.VolumeID, nil)
		return api.Session{}, err
	}
	rec.State, rec.FencingEpoch, rec.UpdatedAt = api.StateMounted, m.FencingEpoch(), time.Now().UTC()
	if err := o.recs.write(rec); err != nil {
		log.Error("session record could not be updated; the mount serves", "error", err)
	}
	s := &session{rec: rec, mount: m}
	o.put(req.VolumeID, s)
	go o.watch(req.VolumeID, s)
	log.Info("volume mounted for a client", "singleWriter", req.SingleWriter, "readOnly", req.ReadOnly)
	return rec, nil
}

// prepareTarget checks the target and cleans a stale mount on it.
func (o *Owner) prepareTarget(target string) error {
	state, err := probe(target)
	switch state {
	case targetStale:
		o.log.Warn("cleaning a stale mount at the target", "target", target)
		if err := detach(target); err != nil {
			return &api.Error{Code: api.CodeInternal, Message: err.Error()}
		}
	case targetMounted:
		return &api.Error{Code: api.CodeTargetBusy, Message: fmt.Sprintf("%s is already a mount point", target)}
	case targetAbsent, targetUnusable:
		return &api.Error{Code: api.CodeInvalidArgument, Message: fmt.Sprintf("target %s: %v", target, err)}
	}
	if err := ensureDir(target); err != nil {
		return &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	return nil
}

func (o *Owner) mountVolume(req api.MountRequest) (*fuse.Mount, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.MountTimeout)
	defer cancel()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(req.CAPEM))
	eps := make([]client.Endpoint, len(req.Endpoints))
	for i, ep := range req.Endpoints {
		eps[i] = client.Endpoint{ID: ep.ID, Address: ep.Address, ServerName: ep.ServerName}
	}
	log := o.log.With("volume", req.VolumeID)
	cl, err := client.Dial(ctx, client.Config{Volume: req.VolumeID, Endpoints: eps, RootCAs: pool,
		Token: req.Token, Logger: log})
	if err != nil {
		return nil, volumeError(req.VolumeID, err)
	}
	m, err := fuse.MountVolume(ctx, req.Target, cl, fuse.Options{Volume: req.VolumeID,
		SingleWriter: req.SingleWriter, ReadOnly: req.ReadOnly, OwnerKey: o.cfg.NodeName, Logger: log})
	if err != nil {
		cl.Close()
		return nil, volumeError(req.VolumeID, err)
	}
	return m, nil
}

func volumeError(volume string, err error) error {
	code := api.CodeInternal
	switch {
	case errors.Is(err, client.ErrUnauthorized):
		code = api.CodeUnauthorized
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = api.CodeUnavailable
	}
	return &api.Error{Code: code, Message: fmt.Sprintf("volume %s: %v", volume, err)}
}

// watch marks a session Lost when its mount ends without Unmount (someone
// unmounted the target behind the owner's back, or the kernel aborted it).
func (o *Owner) watch(volume string, s *session) {
	select {
	case <-s.mount.Done():
	case <-s.mount.Fenced():
		o.fenced(volume, s)
		<-s.mount.Done()
	}
	l := o.volumeLock(volume)
	l.Lock()
	defer l.Unlock()
	if o.get(volume) != s {
		return // unmounted through the owner
	}
	s.rec.State, s.rec.Reason, s.rec.UpdatedAt = api.StateLost, "Unmounted: the mount ended outside the owner", time.Now().UTC()
	s.mount = nil
	if err := o.recs.write(s.rec); err != nil {
		o.log.Error("session record could not be updated", "volume", volume, "error", err)
	}
	o.log.Warn("mount ended outside the owner", "volume", volume, "target", s.rec.Target)
}

// fenced records that a newer single-writer mount elsewhere fenced this
// one. The session stays Mounted (the target is still a mount point, to be
// unmounted as usual); its reason says why every request answers EIO.
func (o *Owner) fenced(volume string, s *session) {
	l := o.volumeLock(volume)
	l.Lock()
	defer l.Unlock()
	if o.get(volume) != s {
		return
	}
	o.mu.Lock() // List reads records under o.mu
	s.rec.Reason = fmt.Sprintf("Fenced: a newer single-writer mount of the volume took over from epoch %d; every request answers EIO",
		s.rec.FencingEpoch)
	s.rec.UpdatedAt = time.Now().UTC()
	rec := s.rec
	o.mu.Unlock()
	if err := o.recs.write(rec); err != nil {
		o.log.Error("session record could not be updated", "volume", volume, "error", err)
	}
	o.log.Warn("mount fenced by a newer single-writer mount", "volume", volume, "target", s.rec.Target,
		"epoch", s.rec.FencingEpoch)
}

// Unmount unmounts and forgets a session named by volume or target.
// Unmounting what is not mounted succeeds; a stale mount at an unknown
// target is cleaned.
func (o *Owner) Unmount(ctx context.Context, req api.UnmountRequest) error {
	if err := req.Validate(); err != nil {
		return &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	volume := req.VolumeID
	if volume == "" {
		v, ok := o.byTarget(req.Target)
		if !ok {
			if st, _ := probe(req.Target); st == targetStale {
				return detach(req.Target)
			}
			return nil
		}
		volume = v
	}
	l := o.volumeLock(volume)
	l.Lock()
	defer l.Unlock()
	s := o.get(volume)
	if s == nil {
		return nil
	}
	if s.mount != nil {
		if err := s.mount.Unmount(ctx); err != nil {
			return &api.Error{Code: api.CodeInternal, Message: err.Error()}
		}
	} else if st, _ := probe(s.rec.Target); st == targetStale {
		if err := detach(s.rec.Target); err != nil {
			return &api.Error{Code: api.CodeInternal, Message: err.Error()}
		}
	}
	o.put(volume, nil)
	if err := o.recs.remove(volume); err != nil {
		return &api.Error{Code: api.CodeInternal, Message: err.Error()}
	}
	o.log.Info("volume unmounted for a client", "volume", volume, "target", s.rec.Target)
	return nil
}

// Close releases the owner lock. Mounts stay: the process exiting ends them
// and the next owner reports and cleans them.
func (o *Owner) Close() error {
	return o.lock.Close()
}
