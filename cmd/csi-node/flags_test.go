package main

import (
	"io"
	"strings"
	"testing"
)

func TestPluginFlagsAreValidated(t *testing.T) {
	localOK := []string{"--driver=local.storage.eric.dev", "--node-id=node-a", "--state-dir=/var/lib/cellfleet/csi",
		"--data-root=/var/lib/cellfleet/volumes", "--consumer-mount-root=/var/lib/cellfleet/consumer"}
	cases := []struct {
		name    string
		args    []string
		wantErr string // empty: accepted
	}{
		{name: "local driver with consumer root accepted", args: localOK},
		{name: "replicated driver accepted", args: []string{"--driver=replicated.storage.eric.dev", "--node-id=node-a",
			"--state-dir=/var/lib/cellfleet/csi-replicated"}},
		{name: "unknown driver rejected", args: []string{"--driver=hostpath", "--node-id=n", "--state-dir=/s", "--data-root=/d"},
			wantErr: `--driver="hostpath"`},
		{name: "missing node id rejected", args: []string{"--driver=local.storage.eric.dev", "--state-dir=/s", "--data-root=/d"},
			wantErr: "--node-id"},
		{name: "node id that is not a label value rejected", args: []string{"--driver=local.storage.eric.dev", "--node-id=a/b",
			"--state-dir=/s", "--data-root=/d"}, wantErr: "--node-id"},
		{name: "local driver without data root rejected", args: []string{"--driver=local.storage.eric.dev", "--node-id=n", "--state-dir=/s"},
			wantErr: "--data-root is required"},
		{name: "relative state dir rejected", args: []string{"--driver=local.storage.eric.dev", "--node-id=n", "--state-dir=state", "--data-root=/d"},
			wantErr: "--state-dir"},
		{name: "unclean consumer root rejected", args: append(append([]string{}, localOK...), "--consumer-mount-root=/c/../x"),
			wantErr: "--consumer-mount-root"},
		{name: "consumer root inside the data root rejected", args: append(append([]string{}, localOK...),
			"--consumer-mount-root=/var/lib/cellfleet/volumes/consumer"), wantErr: "must not contain each other"},
		{name: "consumer root on the replicated driver rejected", args: []string{"--driver=replicated.storage.eric.dev", "--node-id=n",
			"--state-dir=/s", "--consumer-mount-root=/c"}, wantErr: "applies to local.storage.eric.dev only"},
		{name: "bad log level rejected", args: append(append([]string{}, localOK...), "--log-level=loud"), wantErr: "--log-level"},
		{name: "relative registration dir rejected", args: append(append([]string{}, localOK...), "--plugin-registration-dir=plugins_registry"),
			wantErr: "--plugin-registration-dir"},
		{name: "unclean kubelet registration path rejected", args: append(append([]string{}, localOK...),
			"--plugin-registration-dir=/var/lib/kubelet/plugins_registry", "--kubelet-registration-path=/var/lib/kubelet/plugins/../csi.sock"),
			wantErr: "--kubelet-registration-path"},
		{name: "stray argument rejected", args: append(append([]string{}, localOK...), "extra"), wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePluginFlags(tc.args, io.Discard)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("flags %v must be accepted: %v", tc.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("flags %v must be rejected with a message containing %q, got %v", tc.args, tc.wantErr, err)
			}
		})
	}
}

// TestKubeletRegistrationPathDefault: without --kubelet-registration-path the
// kubelet is told the conventional socket under its own plugins directory.
func TestKubeletRegistrationPathDefault(t *testing.T) {
	f, err := parsePluginFlags([]string{"--driver=replicated.storage.eric.dev", "--node-id=node-a", "--state-dir=/s",
		"--kubelet-dir=/var/lib/kubelet", "--plugin-registration-dir=/var/lib/kubelet/plugins_registry"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/var/lib/kubelet/plugins/replicated.storage.eric.dev/csi.sock"; f.kubeletRegistrationPath != want {
		t.Fatalf("kubelet registration path %q, want %q", f.kubeletRegistrationPath, want)
	}
	if got, want := registrationSocket(f.registrationDir, f.driver), "/var/lib/kubelet/plugins_registry/replicated.storage.eric.dev-reg.sock"; got != want {
		t.Fatalf("registration socket %q, want %q", got, want)
	}
}
