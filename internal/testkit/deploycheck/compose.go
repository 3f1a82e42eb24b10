package deploycheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads a compose file as Docker Compose does (compose-go,
// schema validation and consistency checks on), with the variables of
// envFile and the given profiles enabled.
func LoadCompose(ctx context.Context, file, envFile string, profiles []string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithEnvFiles(envFile), cli.WithDotEnv,
		cli.WithName("tunefleet"), cli.WithProfiles(profiles), cli.WithConsistency(true))
	if err != nil {
		return nil, err
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s (profiles %v): %w", file, profiles, err)
	}
	return p, nil
}

// OurImage is the Dockerfile a service of ours is built from: its build's
// dockerfile, or, for a service that only names an image (the web UI on
// the producer image), the service that builds that image. "" for a
// third-party image.
func OurImage(p *types.Project, svc types.ServiceConfig) string {
	if svc.Build != nil {
		if isThirdPartyBuild(svc.Build.Dockerfile) {
			return ""
		}
		return svc.Build.Dockerfile
	}
	for _, other := range p.Services {
		if other.Build != nil && other.Image == svc.Image {
			return other.Build.Dockerfile
		}
	}
	for _, other := range p.DisabledServices {
		if other.Build != nil && other.Image == svc.Image {
			return other.Build.Dockerfile
		}
	}
	return ""
}

// ServiceArgv is the command line a service's container runs.
func ServiceArgv(img *Image, svc types.ServiceConfig) []string {
	return img.Argv(svc.Entrypoint, svc.Command)
}

// CheckCompose checks the services of our images in a loaded project: the
// command line and healthcheck through the CLI, the environment against
// BinaryEnv, and a stop grace period longer than a worker's
// --shutdown-timeout (so SIGKILL does not end what SIGTERM hands back).
func CheckCompose(root string, p *types.Project) (errs []error) {
	for _, name := range sortedKeys(p.Services) {
		svc := p.Services[name]
		df := OurImage(p, svc)
		if df == "" {
			continue
		}
		where := fmt.Sprintf("docker-compose.yml: service %s", name)
		img, err := ParseDockerfile(root, relTo(root, df))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		argv := ServiceArgv(img, svc)
		cmd, err := ParseCommand(argv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if svc.HealthCheck != nil && !svc.HealthCheck.Disable {
			errs = append(errs, checkHealthcheck(where+": healthcheck", svc.HealthCheck.Test)...)
		}
		errs = append(errs, CheckEnv(where, sortedKeys(svc.Environment))...)
		grace := 10 * time.Second // Docker's default
		if svc.StopGracePeriod != nil {
			grace = time.Duration(*svc.StopGracePeriod)
		}
		if err := checkGrace(cmd, grace, "stop_grace_period"); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errs
}

// relTo makes a path the loader resolved relative to root again.
func relTo(root, p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// secretName matches variable names that hold credentials.
var secretName = regexp.MustCompile(`(?i)(PASSWORD|SECRET|TOKEN|AUTH|ACCESS_KEY)`)

// CheckNoLiteralSecrets reads a compose file as written (before
// interpolation) and refuses a credential given literally: every variable
// whose name says it holds one must take its value from ${…} (.env).
func CheckNoLiteralSecrets(file string) []error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return []error{err}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return []error{fmt.Errorf("%s: %w", file, err)}
	}
	var errs []error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Kind == yaml.ScalarNode && secretName.MatchString(k.Value) && !strings.Contains(v.Value, "${") {
					errs = append(errs, fmt.Errorf("%s line %d: %s is given literally: take it from .env as ${%s}", file, v.Line, k.Value, k.Value))
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return errs
}

// thirdPartyDir holds Dockerfiles that build someone else's program (from
// its verified source, on our pinned bases) for the compose file.
const thirdPartyDir = "deploy/docker/third-party/"

func isThirdPartyBuild(dockerfile string) bool {
	return strings.Contains(filepath.ToSlash(dockerfile), thirdPartyDir)
}

// CheckComposeImages: every service's image is built here from a
// Dockerfile whose bases are pinned by digest, or pulled pinned by digest
// (a tag alone can be moved under us); and the queue dashboard is
// read-only and published on loopback only (it has no authentication).
func CheckComposeImages(root string, p *types.Project) (errs []error) {
	for _, name := range sortedKeys(p.Services) {
		svc := p.Services[name]
		where := fmt.Sprintf("docker-compose.yml: service %s", name)
		if svc.Build != nil {
			img, err := ParseDockerfile(root, relTo(root, svc.Build.Dockerfile))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			for i, b := range img.Bases {
				if !stageBefore(img.Stages[:i], b) && !digestRE.MatchString(b) {
					errs = append(errs, fmt.Errorf("%s: %s: FROM %s is not pinned by digest", where, img.Path, b))
				}
			}
		} else if OurImage(p, svc) == "" && !digestRE.MatchString(svc.Image) {
			errs = append(errs, fmt.Errorf("%s: image %s is pinned by tag only: give NAME:TAG@sha256:DIGEST", where, svc.Image))
		}
		if strings.Contains(svc.Image, "asynqmon") {
			ro := svc.Environment["READ_ONLY"]
			if ro == nil || *ro != "true" {
				errs = append(errs, fmt.Errorf("%s: asynqmon must run read-only (READ_ONLY: \"true\"): it can delete and run tasks and has no authentication", where))
			}
			for _, port := range svc.Ports {
				if port.HostIP != "127.0.0.1" && port.HostIP != "::1" {
					errs = append(errs, fmt.Errorf("%s: port %s is published on %q: asynqmon has no authentication; publish it on 127.0.0.1 only", where, port.Published, port.HostIP))
				}
			}
		}
	}
	return errs
}
