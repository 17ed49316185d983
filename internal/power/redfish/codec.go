package redfish

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrResource: a body is not the Redfish resource expected.
var ErrResource = errors.New("redfish: not the resource expected")

// Link is an @odata.id reference.
type Link struct {
	ID string `json:"@odata.id"`
}

// ServiceRoot is /redfish/v1/, of which only Systems is used.
type ServiceRoot struct {
	Systems Link `json:"Systems"`
}

// Collection is a resource collection such as /redfish/v1/Systems.
type Collection struct {
	Members []Link `json:"Members"`
}

// System is a ComputerSystem: its power state and its reset action.
type System struct {
	ID         string `json:"Id"`
	PowerState string `json:"PowerState"` // On, Off, PoweringOn, PoweringOff, Paused
	Actions    struct {
		Reset struct {
			Target  string   `json:"target"`
			Allowed []string `json:"ResetType@Redfish.AllowableValues"`
		} `json:"#ComputerSystem.Reset"`
	} `json:"Actions"`
}

// maxBody bounds a resource: these are a few KiB.
const maxBody = 1 << 20

// DecodeServiceRoot reads the service root; it must link Systems.
func DecodeServiceRoot(b []byte) (ServiceRoot, error) {
	var r ServiceRoot
	if err := decode(b, &r, "service root"); err != nil {
		return r, err
	}
	if !isPath(r.Systems.ID) {
		return r, fmt.Errorf("%w: service root has no Systems link (got %q); is this a Redfish service?", ErrResource, r.Systems.ID)
	}
	return r, nil
}

// DecodeCollection reads a collection; every member must be a path.
func DecodeCollection(b []byte) (Collection, error) {
	var c Collection
	if err := decode(b, &c, "collection"); err != nil {
		return c, err
	}
	for i, m := range c.Members {
		if !isPath(m.ID) {
			return c, fmt.Errorf("%w: collection member %d is %q, want a path under /redfish/v1/", ErrResource, i, m.ID)
		}
	}
	return c, nil
}

// DecodeSystem reads a ComputerSystem; it must have a PowerState and a
// Reset action whose target is a path.
func DecodeSystem(b []byte) (System, error) {
	var s System
	if err := decode(b, &s, "ComputerSystem"); err != nil {
		return s, err
	}
	if s.PowerState == "" {
		return s, fmt.Errorf("%w: ComputerSystem %q has no PowerState", ErrResource, s.ID)
	}
	if !isPath(s.Actions.Reset.Target) {
		return s, fmt.Errorf("%w: ComputerSystem %q has no #ComputerSystem.Reset target (got %q)", ErrResource, s.ID, s.Actions.Reset.Target)
	}
	return s, nil
}

func decode(b []byte, v any, what string) error {
	if len(b) > maxBody {
		return fmt.Errorf("%w: %s of %d bytes, over %d", ErrResource, what, len(b), maxBody)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s is not the JSON expected: %v", ErrResource, what, err)
	}
	return nil
}

// isPath accepts the service-relative paths Redfish links are: absolute,
// under /redfish/v1/, without a scheme or host that could send the
// driver's credentials elsewhere.
func isPath(p string) bool {
	return strings.HasPrefix(p, "/redfish/v1/") && !strings.Contains(p, "//") && !strings.ContainsAny(p, " \t\r\n?#")
}
