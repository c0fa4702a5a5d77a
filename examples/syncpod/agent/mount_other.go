//go:build !linux

package agent

import (
	"errors"

	"k8s.io/apimachinery/pkg/api/resource"
)

var errNoMounts = errors.New("mounts are only supported on Linux")

func mountTmpfs(string, *resource.Quantity) error { return errNoMounts }

func unmount(string) error { return errNoMounts }

func isMountPoint(string) (bool, error) { return false, nil }

func checkNoMounts(string) error { return nil }
