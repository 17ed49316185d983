package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// newIdentity builds the identity service: the fleet's identity key,
// made when the fleet has none yet (otherwise it must be copied from
// another server) and checked against the fleet's, and the config's file
// templates, which must all parse and check before the server starts.
func newIdentity(ctx context.Context, c *config.Config, store inventory.Store, view *machineview.View, log *slog.Logger) (*identitysvc.Service, error) {
	files, err := identityTemplates(c)
	if err != nil {
		return nil, err
	}
	sealer, noKey := identitysvc.OpenKey(ctx, store, c.Identity.KeyFile)
	if noKey != nil && !errors.Is(noKey, identitysvc.ErrNoKey) {
		return nil, fmt.Errorf("identity.key_file: %w", noKey)
	}
	if noKey != nil {
		// An error, not fatal: a fleet without sshd images needs no key.
		// Each machine refused for it is logged as an error too.
		log.Error("machines' SSH host keys cannot be made or served; machines whose image has sshd will not boot", "err", noKey)
	}
	profile := func(mac net.HardwareAddr) string { t, _ := view.Resolve(mac); return t.Profile }
	return identitysvc.New(identitysvc.Config{Store: store, Sealer: sealer, NoKey: noKey, Files: files, Profile: profile, Logger: log})
}

// CheckTemplates parses and checks the config's file templates, as the
// server does when it starts: for bootfleet check.
func CheckTemplates(c *config.Config) error {
	_, err := identityTemplates(c)
	return err
}

// identityTemplates maps the config's files: and vars: onto templates.
func identityTemplates(c *config.Config) (*identitysvc.Templates, error) {
	profiles := map[string]identitysvc.Set{}
	for name, p := range c.Profiles {
		set, err := fileSet("profiles."+name, p.Files, p.Vars)
		if err != nil {
			return nil, err
		}
		profiles[name] = set
	}
	machines := map[string]identitysvc.MachineSet{}
	for i, m := range c.Machines {
		hw, err := net.ParseMAC(m.MAC)
		if err != nil || len(m.Files) == 0 && len(m.Vars) == 0 {
			continue
		}
		set, err := fileSet(fmt.Sprintf("machines[%d]", i), m.Files, m.Vars)
		if err != nil {
			return nil, err
		}
		prof := m.Profile
		if prof == "" {
			prof = c.DefaultProfile
		}
		machines[hw.String()] = identitysvc.MachineSet{Set: set, Profile: prof}
	}
	return identitysvc.NewTemplates(profiles, machines)
}

func fileSet(key string, files []config.File, vars map[string]string) (identitysvc.Set, error) {
	set := identitysvc.Set{Key: key, Vars: vars}
	for i, f := range files {
		mode, err := f.ParseMode()
		if err != nil {
			return set, fmt.Errorf("%s.files[%d].mode: %w", key, i, err)
		}
		text := f.Template
		if f.TemplateFile != "" {
			b, err := os.ReadFile(f.TemplateFile)
			if err != nil {
				return set, fmt.Errorf("%s.files[%d].template_file: %w", key, i, err)
			}
			text = string(b)
		}
		set.Files = append(set.Files, identitysvc.FileSpec{Path: f.Path, Mode: mode, Owner: f.Owner, Template: text})
	}
	return set, nil
}

// withIdentity serves agents' identity requests beside the boot paths.
func withIdentity(boot http.Handler, id *identitysvc.Service, auth identitysvc.Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(identitysvc.Path, id.Handler(auth))
	mux.Handle("/", boot)
	return mux
}
