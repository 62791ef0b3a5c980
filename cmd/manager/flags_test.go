package main

import (
	"strings"
	"testing"
	"time"
)

func TestMemberReplacementDelayFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{name: "defaults to ten minutes", args: nil, want: 10 * time.Minute},
		{name: "accepts exactly one minute", args: []string{"--member-replacement-delay=1m"}, want: time.Minute},
		{name: "accepts an hour", args: []string{"--member-replacement-delay=1h"}, want: time.Hour},
		{name: "refuses below one minute", args: []string{"--member-replacement-delay=59s"},
			wantErr: "below the minimum of 1m0s"},
		{name: "refuses zero", args: []string{"--member-replacement-delay=0s"}, wantErr: "below the minimum"},
		{name: "refuses a non-duration", args: []string{"--member-replacement-delay=soon"}, wantErr: "invalid value"},
		{name: "refuses stray arguments", args: []string{"extra"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := mustParse(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if o.memberReplacementDelay != tc.want {
				t.Fatalf("member replacement delay = %s, want %s", o.memberReplacementDelay, tc.want)
			}
		})
	}
}

// mustParse parses args. With wantErr set it wants them refused with an
// error containing it, and reports false; else it wants them accepted.
func mustParse(t *testing.T, args []string, wantErr string) (options, bool) {
	t.Helper()
	o, err := parseFlags(args)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("parseFlags(%q) error = %v, want one containing %q", args, err, wantErr)
		}
		return o, false
	}
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return o, true
}

func TestFleetNamespacesFlag(t *testing.T) {
	cases := []struct {
		arg     string
		want    []string
		wantErr string
	}{
		{arg: "", want: []string{"celld"}},
		{arg: "--fleet-namespaces=a,b, a", want: []string{"a", "b"}},
		{arg: "--fleet-namespaces=Bad_NS", wantErr: "is not a namespace name"},
		{arg: "--fleet-namespaces=,", wantErr: "at least one namespace"},
	}
	for _, tc := range cases {
		var args []string
		if tc.arg != "" {
			args = []string{tc.arg}
		}
		o, err := parseFlags(args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseFlags(%q) error = %v, want one containing %q", tc.arg, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(o.fleetNamespaces, ",") != strings.Join(tc.want, ",") {
			t.Errorf("parseFlags(%q) = %v, %v; want %v", tc.arg, o.fleetNamespaces, err, tc.want)
		}
	}
}

func TestCSIControllerSocketFlag(t *testing.T) {
	cases := []struct {
		arg, want, wantErr string
	}{
		{arg: "", want: ""},
		{arg: "--csi-controller-socket=unix:///csi/csi.sock", want: "/csi/csi.sock"},
		{arg: "--csi-controller-socket=/csi/csi.sock", want: "/csi/csi.sock"},
		{arg: "--csi-controller-socket=tcp://0.0.0.0:9000", wantErr: "only unix:// sockets"},
		{arg: "--csi-controller-socket=csi.sock", wantErr: "absolute and clean"},
		{arg: "--storage-namespace=Storage", wantErr: "--storage-namespace"},
	}
	for _, tc := range cases {
		args := []string{"--controllers=storage"}
		if tc.arg != "" {
			args = append(args, tc.arg)
		}
		o, err := parseFlags(args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseFlags(%q) error = %v, want one containing %q", tc.arg, err, tc.wantErr)
			}
			continue
		}
		if err != nil || o.csiControllerSocket != tc.want {
			t.Errorf("parseFlags(%q) = socket %q, %v; want %q", tc.arg, o.csiControllerSocket, err, tc.want)
		}
	}
}

func TestVolumeControllerFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(o options) string
	}{
		{name: "defaults: shared runtime, 30m replacement delay, distinct namespaces", check: func(o options) string {
			if o.replicaRuntime != "shared" || o.replicaReplacementDelay != 30*time.Minute ||
				o.storageNamespace != "cellfleet-storage" || o.managerNamespace != "cellfleet-system" {
				return "defaults are not shared/30m/cellfleet-storage/cellfleet-system"
			}
			return ""
		}},
		{name: "shared accepted", args: []string{"--replica-runtime=shared"}},
		{name: "pod refused with the reason", args: []string{"--replica-runtime=pod"},
			wantErr: `--replica-runtime="pod" is not supported: only "shared" is, because the legacy pod runtime`},
		{name: "replacement delay of 1m accepted", args: []string{"--replica-replacement-delay=1m"}, check: func(o options) string {
			if o.replicaReplacementDelay != time.Minute {
				return "delay not 1m"
			}
			return ""
		}},
		{name: "replacement delay below 1m refused", args: []string{"--replica-replacement-delay=30s"},
			wantErr: "--replica-replacement-delay=30s is below the minimum of 1m0s"},
		{name: "heal defaults: 6h rebuild timeout, 5m orphan grace", check: func(o options) string {
			if o.replicaRebuildTimeout != 6*time.Hour || o.orphanVolumeGrace != 5*time.Minute || o.maxReplacements != 4 {
				return "defaults are not 6h/5m/4 replacements"
			}
			return ""
		}},
		{name: "orphan grace of 1m accepted", args: []string{"--orphan-volume-grace=1m", "--replica-rebuild-timeout=1m"}, check: func(o options) string {
			if o.orphanVolumeGrace != time.Minute || o.replicaRebuildTimeout != time.Minute {
				return "grace or timeout not 1m"
			}
			return ""
		}},
		{name: "orphan grace below 1m refused", args: []string{"--orphan-volume-grace=10s"},
			wantErr: "--orphan-volume-grace=10s is below the minimum of 1m0s"},
		{name: "rebuild timeout below 1m refused", args: []string{"--replica-rebuild-timeout=5s"},
			wantErr: "--replica-rebuild-timeout=5s is below the minimum of 1m0s"},
		{name: "replacement bound: 4 by default, 1 accepted", args: []string{"--max-concurrent-replacements=1"}, check: func(o options) string {
			if o.maxReplacements != 1 {
				return "bound not 1"
			}
			return ""
		}},
		{name: "replacement bound below 1 refused", args: []string{"--max-concurrent-replacements=0"},
			wantErr: "--max-concurrent-replacements=0 is below the minimum of 1"},
		{name: "one namespace for CA keys and nodes refused", args: []string{"--storage-namespace=x", "--manager-namespace=x"},
			wantErr: "CA keys would be readable"},
		{name: "bad storage namespace refused", args: []string{"--storage-namespace=Bad_NS"}, wantErr: "--storage-namespace"},
		{name: "certificate validity: 90 days by default", check: func(o options) string {
			if o.certificateValidity != 90*24*time.Hour {
				return "validity not 2160h"
			}
			return ""
		}},
		{name: "certificate validity of 1h accepted", args: []string{"--replica-certificate-validity=1h"}, check: func(o options) string {
			if o.certificateValidity != time.Hour {
				return "validity not 1h"
			}
			return ""
		}},
		{name: "certificate validity below 1h refused", args: []string{"--replica-certificate-validity=59m"},
			wantErr: "--replica-certificate-validity=59m0s must be between 1h0m0s and 43800h0m0s"},
		{name: "certificate validity past half the CA's life refused", args: []string{"--replica-certificate-validity=43801h"},
			wantErr: "--replica-certificate-validity=43801h0m0s must be between"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := mustParse(t, append([]string{"--controllers=storage"}, tc.args...), tc.wantErr)
			if !ok {
				return
			}
			if tc.check != nil {
				if msg := tc.check(o); msg != "" {
					t.Fatal(msg)
				}
			}
		})
	}
}

// --controllers selects one half; the fleet operator is the default. A flag
// only the other half reads is refused, so a manifest that still passes the
// CSI controller's socket to the fleet operator fails at start instead of
// running without a CSI controller.
func TestControllersFlagSelectsOneHalfAndRefusesTheOtherHalfsFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    controllerSet
		wantErr string
	}{
		{name: "the fleet operator by default", want: controllersFleet},
		{name: "fleet", args: []string{"--controllers=fleet", "--member-replacement-delay=5m"}, want: controllersFleet},
		{name: "storage", args: []string{"--controllers=storage", "--csi-controller-socket=/csi/csi.sock"}, want: controllersStorage},
		{name: "both at once refused", args: []string{"--controllers=fleet,storage"}, wantErr: `"fleet,storage" is neither "fleet" nor "storage"`},
		{name: "an unknown half refused", args: []string{"--controllers=volume"}, wantErr: `"volume" is neither`},
		{name: "the CSI socket refused by the fleet half", args: []string{"--csi-controller-socket=/csi/csi.sock"},
			wantErr: "--csi-controller-socket is a flag of --controllers=storage, and this manager runs --controllers=fleet"},
		{name: "a replica flag refused by the fleet half", args: []string{"--controllers=fleet", "--replica-replacement-delay=1m"},
			wantErr: "--replica-replacement-delay is a flag of --controllers=storage"},
		{name: "the CA namespace refused by the fleet half", args: []string{"--manager-namespace=cellfleet-system"},
			wantErr: "--manager-namespace is a flag of --controllers=storage"},
		{name: "the member delay refused by the storage half", args: []string{"--controllers=storage", "--member-replacement-delay=1m"},
			wantErr: "--member-replacement-delay is a flag of --controllers=fleet, and this manager runs --controllers=storage"},
		{name: "fleet namespaces refused by the storage half", args: []string{"--controllers=storage", "--fleet-namespaces=celld"},
			wantErr: "--fleet-namespaces is a flag of --controllers=fleet"},
		{name: "the storage namespace read by both", args: []string{"--controllers=fleet", "--storage-namespace=st"}, want: controllersFleet},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := mustParse(t, tc.args, tc.wantErr)
			if ok && o.controllers != tc.want {
				t.Fatalf("parseFlags(%q) runs %q, want %q", tc.args, o.controllers, tc.want)
			}
		})
	}
}

// The fleet Role lets the operator delete Pods and claims in every fleet
// namespace; in the storage namespace those are the NODE Pods and the
// replicas' backing claims, so the fleet operator refuses to operate there.
func TestFleetNamespacesThatIncludeTheStorageNamespaceAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "the default storage namespace", args: []string{"--fleet-namespaces=celld,cellfleet-storage"},
			wantErr: `--fleet-namespaces includes "cellfleet-storage", the storage namespace (--storage-namespace)`},
		{name: "another storage namespace", args: []string{"--fleet-namespaces=st", "--storage-namespace=st"},
			wantErr: `--fleet-namespaces includes "st"`},
		{name: "a fleet namespace beside the storage namespace", args: []string{"--fleet-namespaces=celld,b", "--storage-namespace=st"}},
		{name: "cellfleet-storage as a fleet namespace while storage lives elsewhere", args: []string{"--fleet-namespaces=cellfleet-storage", "--storage-namespace=st"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(append([]string{"--controllers=fleet"}, tc.args...))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags(%q): %v", tc.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "backing claims") {
				t.Fatalf("parseFlags(%q) error = %v, want one containing %q and saying why", tc.args, err, tc.wantErr)
			}
		})
	}
}
