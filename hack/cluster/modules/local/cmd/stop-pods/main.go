// Command stop-pods stops and removes every pod sandbox of a CRI runtime, as the kubelet would: the
// runtime then tears down each pod's network through CNI, so no interface, address lease or port
// mapping outlives the cluster. cluster.sh down runs it after the kubelet has stopped.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint, unix:///path/to/containerd.sock")
	flag.Parse()
	logger := klog.Background()
	runtime, err := remote.NewRemoteRuntimeService(*endpoint, 10*time.Second, nil, &logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sandboxes, err := runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	failed := false
	for _, sandbox := range sandboxes {
		name := sandbox.Metadata.Namespace + "/" + sandbox.Metadata.Name
		if err := runtime.StopPodSandbox(ctx, sandbox.Id); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s: %v\n", name, err)
			failed = true
		}
		if err := runtime.RemovePodSandbox(ctx, sandbox.Id); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", name, err)
			failed = true
		}
	}
	fmt.Printf("stopped and removed %d pod sandbox(es)\n", len(sandboxes))
	if failed {
		os.Exit(1)
	}
}
