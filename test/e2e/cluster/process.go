package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// ContainerProcesses returns the host pids of the processes named comm that
// run in the Pod with the given UID. Every node shares this host's kernel, so
// a container's process is an ordinary host process whose cgroup path names
// its Pod ("pod<uid>" under the node's cgroupfs root).
func ContainerProcesses(pod types.UID, comm string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	marks := []string{"pod" + string(pod), "pod" + strings.ReplaceAll(string(pod), "-", "_")}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(name)) != comm {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, m := range marks {
			if strings.Contains(string(cg), m) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// KillContainerProcess sends SIGKILL to the process named comm in the Pod:
// the workload dies without draining, as on a crash.
func KillContainerProcess(pod types.UID, comm string) error {
	pids, err := ContainerProcesses(pod, comm)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("no %s process runs in Pod %s", comm, pod)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill -9 %d (%s of Pod %s): %w", p, comm, pod, err)
		}
	}
	return nil
}

// KillContainer sends SIGKILL to every process of one container, named by the
// container ID of its Pod status ("containerd://<id>"): the cgroupfs path of
// a container's processes ends in its ID. Used where one image runs in
// several containers of a Pod under one process name (the NODE Pod's
// csi-node, csi-node-replicated and mount-owner).
func KillContainer(containerID string) error {
	_, id, ok := strings.Cut(containerID, "://")
	if !ok || id == "" {
		return fmt.Errorf("container ID %q: want <runtime>://<id>", containerID)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), "/"+id+"\n") {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill -9 %d (container %s): %w", pid, id, err)
		}
		killed++
	}
	if killed == 0 {
		return fmt.Errorf("no process runs in container %s", id)
	}
	return nil
}
