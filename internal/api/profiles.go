package api

import (
	"net/http"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/ipxe"
)

func (s *server) listProfiles(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.cfg.Store.ListProfiles(r.Context())
	if err != nil {
		return err
	}
	out := ProfileList{Profiles: make([]Profile, 0, len(ps))}
	for _, p := range ps {
		out.Profiles = append(out.Profiles, profileOut(p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getProfile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.cfg.Store.GetProfile(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, profileOut(p))
	return nil
}

// checkCmdline renders the template with sample values, so a typo such as
// {{.Nmae}} is refused now rather than discovered at the next boot.
func checkCmdline(p inventory.Profile) error {
	_, err := ipxe.RenderCmdline(p.Cmdline, ipxe.Vars{MAC: "52:54:00:12:34:56", Name: "pc1", Profile: p.Name,
		ServerIP: "10.0.0.1", HTTPBase: "http://10.0.0.1:8080", DoneURL: "http://10.0.0.1:8080/done/52-54-00-12-34-56",
		Root: "nbd:10.0.0.1:10809:m-52-54-00-12-34-56-0123456789abcdef0123456789abcdef"})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "cmdline template: ")
		return inventory.Invalid("cmdline", "%s (fields: .MAC .Name .Profile .ServerIP .HTTPBase .DoneURL .Root)", msg)
	}
	return nil
}

// checkProfile validates p and its templates: the cmdline's and its
// files:, which must parse and use only variables that exist.
func (s *server) checkProfile(r *http.Request, p *inventory.Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := checkCmdline(*p); err != nil {
		return err
	}
	if err := inventory.CheckPinIn(r.Context(), s.cfg.Store, p.Root.Image, p.Root.Channel); err != nil {
		return err
	}
	return s.checkFiles(r, func(ids IdentityService) error { return ids.CheckProfile(r.Context(), *p) }, len(p.RootFiles)+len(p.Vars))
}

// checkFiles runs check when the server renders files; without the
// identity service it refuses files: and vars: it cannot check.
func (s *server) checkFiles(r *http.Request, check func(IdentityService) error, n int) error {
	if s.cfg.Identities == nil {
		if n > 0 {
			return inventory.Invalid("files", "this server serves no machine identities, so it cannot check or render files: and vars:")
		}
		return nil
	}
	return check(s.cfg.Identities)
}

func (s *server) createProfile(w http.ResponseWriter, r *http.Request) error {
	var in Profile
	if err := decode(r, &in); err != nil {
		return err
	}
	p, err := profileIn(in)
	if err != nil {
		return err
	}
	if err := s.checkProfile(r, &p); err != nil {
		return err
	}
	p, err = s.cfg.Store.CreateProfile(r.Context(), p)
	if err != nil {
		return err
	}
	s.changed(r, "", "", "")
	w.Header().Set("Location", Prefix+"/profiles/"+p.Name)
	writeJSON(w, http.StatusCreated, profileOut(p))
	return nil
}

func (s *server) putProfile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	old, err := s.cfg.Store.GetProfile(r.Context(), name)
	if err != nil {
		return err
	}
	var in Profile
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.Name == "" {
		in.Name = name
	}
	if in.Name != name {
		return inventory.Invalid("name", "body name %q differs from %q in the path; profiles cannot be renamed (add a new one and move machines)", in.Name, name)
	}
	if err := readOnly(old.Source, "name", "profile "+name); err != nil {
		return err
	}
	p, err := profileIn(in)
	if err != nil {
		return err
	}
	if err := s.checkProfile(r, &p); err != nil {
		return err
	}
	if p, err = s.cfg.Store.UpdateProfile(r.Context(), p); err != nil {
		return err
	}
	s.changed(r, "", "", "")
	writeJSON(w, http.StatusOK, profileOut(p))
	return nil
}

func (s *server) deleteProfile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	old, err := s.cfg.Store.GetProfile(r.Context(), name)
	if err != nil {
		return err
	}
	if err := readOnly(old.Source, "name", "profile "+name); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteProfile(r.Context(), name); err != nil {
		return err
	}
	s.changed(r, "", "", "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
