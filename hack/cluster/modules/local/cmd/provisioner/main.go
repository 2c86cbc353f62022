// Command provisioner gives each claim of its StorageClass a directory under --root, as a hostPath
// volume. The directory is world-writable, because a hostPath volume ignores the pod's fsGroup and the
// charts' pods run as a non-root user. One node only: the volumes live on the machine that runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

type hostDirs struct{ root string }

func (h hostDirs) dir(pvName string) (string, error) {
	dir := filepath.Join(h.root, pvName)
	if filepath.Dir(dir) != h.root || strings.HasPrefix(pvName, ".") {
		return "", fmt.Errorf("volume name %q is not a plain directory name", pvName)
	}
	return dir, nil
}

func (h hostDirs) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	dir, err := h.dir(opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// MkdirAll's mode passes through the umask.
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	directory := v1.HostPathDirectory
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *opts.StorageClass.ReclaimPolicy,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: opts.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &directory},
			},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (h hostDirs) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return fmt.Errorf("volume %s is not a hostPath volume", pv.Name)
	}
	dir, err := h.dir(pv.Name)
	if err != nil {
		return err
	}
	if pv.Spec.HostPath.Path != dir {
		return fmt.Errorf("volume %s points at %s, outside %s", pv.Name, pv.Spec.HostPath.Path, h.root)
	}
	return os.RemoveAll(dir)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	root := flag.String("root", "", "directory that holds the volumes")
	name := flag.String("name", "pytorchjob-mnist.local/host-dir", "provisioner name that StorageClasses give")
	flag.Parse()
	if *kubeconfig == "" || *root == "" {
		klog.Exit("--kubeconfig and --root are required")
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		klog.Exit(err)
	}
	if err := os.MkdirAll(absRoot, 0o755); err != nil {
		klog.Exit(err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	client := kubernetes.NewForConfigOrDie(config)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	controller.NewProvisionController(ctx, client, *name, hostDirs{root: filepath.Clean(absRoot)},
		controller.LeaderElection(false)).Run(ctx)
}
