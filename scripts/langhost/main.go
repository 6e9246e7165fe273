// pulumi-language-python: a compact Python language host for the Pulumi CLI.
//
// Built by scripts/install-pulumi. The upstream host module
// (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not
// served by the Go module proxy reachable here, so this host is rebuilt on
// the same sdk/v3 building blocks the upstream one uses (python/toolchain for
// pip/poetry/uv virtualenv handling, sdk.PolicyProxy for policy packs) and
// follows upstream behaviour for Run, RunPlugin (plugins and policy packs; a pack
// that says `readsStackConfig: false` is started without upstream's proxy),
// GetRequiredPackages, InstallDependencies, GetProgramDependencies, About.
// Code generation RPCs (convert, package gen-sdk/add) are not implemented.
// Modeled on upstream sdk/python/cmd/pulumi-language-python/main.go
// (Copyright Pulumi Corporation, Apache License 2.0).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/contract"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

// runBootstrap starts pulumi-language-python-exec with SIGINT ignored. A Ctrl-C in a terminal reaches every
// process of the CLI's group, and the CLI stops a plugin with SIGINT to the plugin's group (this host and
// the program): either raised KeyboardInterrupt inside the exec script's loop.run_until_complete, which
// does not catch it, and printed a Python traceback in the middle of a cancelled update. The program is
// stopped by this host instead, with SIGTERM (see Run).
const runBootstrap = `import runpy, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")`

const (
	execScript = "pulumi-language-python-exec" // must sit next to this binary
	// Exit code the exec script uses after it already printed a user-facing error.
	exitAfterUserMessage = 32
)

func main() {
	var tracing, givenExecutor string
	flag.StringVar(&tracing, "tracing", "", "Emit tracing to a Zipkin-compatible tracing endpoint")
	flag.StringVar(&givenExecutor, "use-executor", "", "Use the given program as the executor")
	showVersion := flag.Bool("version", false, "Print the current plugin version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		os.Exit(0)
	}
	logging.InitLogging(false, 0, false)
	cmdutil.InitTracing("pulumi-language-python", "pulumi-language-python", tracing)

	pythonExec := givenExecutor
	if pythonExec == "" {
		self, err := os.Executable()
		if err != nil {
			cmdutil.Exit(fmt.Errorf("could not determine current executable: %w", err))
		}
		pythonExec = filepath.Join(filepath.Dir(self), execScript)
		if _, err := os.Stat(pythonExec); err != nil {
			cmdutil.Exit(fmt.Errorf("missing executor %s: %w", pythonExec, err))
		}
	}

	var engineAddress string
	if args := flag.Args(); len(args) > 0 {
		engineAddress = args[0]
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	cancelChannel := make(chan bool)
	go func() {
		<-ctx.Done()
		cancel()
		close(cancelChannel)
	}()
	if engineAddress != "" {
		if err := rpcutil.Healthcheck(ctx, engineAddress, 5*time.Minute, cancel); err != nil {
			cmdutil.Exit(fmt.Errorf("could not start health check host RPC server: %w", err))
		}
	}

	cancelCtx, cancelFunc := context.WithCancel(context.Background())
	host := &pythonLanguageHost{
		exec: pythonExec, engineAddress: engineAddress, tracing: tracing,
		cancelCtx: cancelCtx, cancelFunc: cancelFunc,
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancelChannel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
		Options: rpcutil.TracingServerInterceptorOptions(nil),
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("could not start language host RPC server: %w", err))
	}
	fmt.Printf("%d\n", handle.Port) // tells the CLI where to connect
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("language host RPC stopped serving: %w", err))
	}
}

type pythonLanguageHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	exec          string
	engineAddress string
	tracing       string
	cancelCtx     context.Context
	cancelFunc    context.CancelFunc
}

// readsStackConfigOption is the PulumiPolicy.yaml `runtime.options` key by which a policy pack says whether it reads
// the stack's configuration (pulumi.Config, get_stack, get_project) in its process. Upstream's host always assumes
// it does: a proxy answers the engine's ConfigureStack, starts the pack with that configuration in its environment,
// then decodes and re-encodes every call to it (at 256 pools about 1,100 Analyze and Remediate calls, each waited
// for by the engine in turn: docs/performance.md). `false` starts the pack at once, and the engine talks to it.
const readsStackConfigOption = "readsStackConfig"

// startsWithoutStackConfig: the policy pack of `info` says it reads no stack configuration.
func startsWithoutStackConfig(info *pulumirpc.ProgramInfo) (bool, error) {
	if info.GetOptions() == nil {
		return false, nil
	}
	v, ok := info.GetOptions().AsMap()[readsStackConfigOption]
	if !ok {
		return false, nil
	}
	reads, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("the %s option must be true or false, not %v", readsStackConfigOption, v)
	}
	return !reads, nil
}

// parseOptions maps Pulumi.yaml / PulumiPolicy.yaml `runtime.options` onto toolchain options.
func parseOptions(root, programDir string, options map[string]any, isPlugin bool) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{Root: root, ProgramDir: programDir}
	if v, ok := options["virtualenv"]; ok {
		s, ok := v.(string)
		if !ok {
			return opts, errors.New("virtualenv option must be a string")
		}
		opts.Virtualenv = s
	}
	if v, ok := options["typechecker"]; ok {
		switch v {
		case "mypy":
			opts.Typechecker = toolchain.TypeCheckerMypy
		case "pyright":
			opts.Typechecker = toolchain.TypeCheckerPyright
		default:
			return opts, fmt.Errorf("unsupported typechecker option: %v", v)
		}
	}
	if v, ok := options["toolchain"]; ok {
		switch v {
		case "pip":
			opts.Toolchain = toolchain.Pip
		case "poetry":
			opts.Toolchain = toolchain.Poetry
		case "uv":
			opts.Toolchain = toolchain.Uv
		default:
			return opts, fmt.Errorf("unsupported toolchain option: %v", v)
		}
	}
	// Plugins (not programs or policy packs) default to a local "venv", as upstream does.
	if isPlugin && (opts.Toolchain == toolchain.Pip || opts.Toolchain == toolchain.Auto) && opts.Virtualenv == "" {
		opts.Virtualenv = "venv"
	}
	return opts, nil
}

func optionsOf(info *pulumirpc.ProgramInfo, isPlugin bool) (toolchain.PythonOptions, toolchain.Toolchain, error) {
	var raw map[string]any
	if info.GetOptions() != nil {
		raw = info.GetOptions().AsMap()
	}
	opts, err := parseOptions(info.GetRootDirectory(), info.GetProgramDirectory(), raw, isPlugin)
	if err != nil {
		return opts, nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	return opts, tc, err
}

func (host *pythonLanguageHost) Handshake(ctx context.Context,
	req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	host.engineAddress = req.EngineAddress
	hctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	if err := rpcutil.Healthcheck(hctx, host.engineAddress, 5*time.Minute, cancel); err != nil {
		return nil, fmt.Errorf("could not start health check host RPC server: %w", err)
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (host *pythonLanguageHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (host *pythonLanguageHost) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	host.cancelFunc()
	return &emptypb.Empty{}, nil
}

// engineLogWriters streams tool output (e.g. venv creation) to the engine as ephemeral log lines.
func (host *pythonLanguageHost) engineLogWriters(ctx context.Context) (io.Writer, io.Writer, io.Closer, error) {
	conn, err := grpc.NewClient(host.engineAddress,
		grpc.WithTransportCredentials(insecure.NewCredentials()), rpcutil.GrpcChannelOptions())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("language host could not make connection to engine: %w", err)
	}
	client := pulumirpc.NewEngineClient(conn)
	id := rand.Int31() //nolint:gosec
	mk := func(sev pulumirpc.LogSeverity) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			_, err := client.Log(ctx, &pulumirpc.LogRequest{
				Message: strings.ToValidUTF8(string(p), "\uFFFD"), Ephemeral: true, StreamId: id, Severity: sev,
			})
			if err != nil {
				return 0, err
			}
			return len(p), nil
		})
	}
	return mk(pulumirpc.LogSeverity_INFO), mk(pulumirpc.LogSeverity_ERROR), conn, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// packagesScript (packages.py) prints, in one Python start, every distribution installed where the program
// runs with its version and the path of its pulumi-plugin.json. Upstream asks `python -m pip list --format
// json` (0.5 s of CPU importing pip) and then a second Python for the plugin files, on every pass of every
// preview and update. tests/test_langhost.py holds the script to pip's own list.
//
//go:embed packages.py
var packagesScript string

type installedPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Plugin  string `json:"plugin"`
}

// installedPackages runs packagesScript with the program's Python.
func installedPackages(ctx context.Context, tc toolchain.Toolchain) ([]installedPackage, error) {
	cmd, err := tc.Command(ctx, "-c", packagesScript)
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the installed Python packages: %w", err)
	}
	var pkgs []installedPackage
	if err := json.Unmarshal(out, &pkgs); err != nil {
		return nil, fmt.Errorf("parsing the installed Python packages: %w", err)
	}
	return pkgs, nil
}

var pep440 = regexp.MustCompile(`^(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:(a|b|rc)(\d+))?$`)

// pluginVersion converts simple PEP 440 versions (1.2.3, 1.2.3a4, 1.2.3rc1) to semver.
func pluginVersion(v string) (string, bool) {
	m := pep440.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	for i := 2; i <= 3; i++ {
		if m[i] == "" {
			m[i] = "0"
		}
	}
	out := "v" + m[1] + "." + m[2] + "." + m[3]
	if m[4] != "" {
		out += "-" + map[string]string{"a": "alpha", "b": "beta", "rc": "rc"}[m[4]] + "." + m[5]
	}
	return out, true
}

// GetRequiredPackages reports the resource plugins that installed Pulumi Python packages need.
func (host *pythonLanguageHost) GetRequiredPackages(ctx context.Context,
	req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	_, tc, err := optionsOf(req.Info, false)
	if err != nil {
		return nil, err
	}
	stdout, stderr, closer, err := host.engineLogWriters(ctx)
	if err != nil {
		return nil, err
	}
	defer contract.IgnoreClose(closer)
	if err := tc.EnsureVenv(ctx, req.Info.ProgramDirectory, false, true, stdout, stderr); err != nil {
		return nil, err
	}
	pkgs, err := installedPackages(ctx, tc)
	if err != nil {
		return nil, err
	}
	result := []*pulumirpc.PackageDependency{}
	for _, p := range pkgs {
		if p.Name == "pulumi-policy" || p.Name == "pulumi-esc-sdk" {
			continue // known to ship no plugin
		}
		var pj *plugin.PulumiPluginJSON
		if p.Plugin != "" {
			if data, err := os.ReadFile(p.Plugin); err == nil {
				pj = &plugin.PulumiPluginJSON{}
				if err := json.Unmarshal(data, pj); err != nil {
					return nil, fmt.Errorf("failed to parse pulumi-plugin.json for %s: %w", p.Name, err)
				}
			}
		}
		if pj == nil && !strings.HasPrefix(p.Name, "pulumi-") {
			continue
		}
		dep := &pulumirpc.PackageDependency{Kind: "resource"}
		if pj != nil {
			if !pj.Resource {
				continue
			}
			dep.Name, dep.Version, dep.Server = pj.Name, pj.Version, pj.Server
			if q := pj.Parameterization; q != nil {
				dep.Parameterization = &pulumirpc.PackageParameterization{Name: q.Name, Version: q.Version, Value: q.Value}
			}
		}
		if dep.Name == "" {
			dep.Name = strings.TrimPrefix(p.Name, "pulumi-")
		}
		if dep.Version == "" {
			v, ok := pluginVersion(p.Version)
			if !ok {
				continue
			}
			dep.Version = v
		}
		if !strings.HasPrefix(dep.Version, "v") {
			dep.Version = "v" + dep.Version
		}
		result = append(result, dep)
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: result}, nil
}

// Run executes the Python program through pulumi-language-python-exec inside the configured environment.
func (host *pythonLanguageHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	opts, tc, err := optionsOf(req.Info, false)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}

	args := []string{"-c", runBootstrap, host.exec}
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", host.engineAddress)
	add("project", req.GetProject())
	add("root_directory", req.GetInfo().GetRootDirectory())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("tracing", host.tracing)
	add("organization", req.GetOrganization())
	args = append(args, req.Info.EntryPoint)
	args = append(args, req.GetArgs()...)

	checker := ""
	switch opts.Typechecker {
	case toolchain.TypeCheckerMypy:
		checker = "mypy"
	case toolchain.TypeCheckerPyright:
		checker = "pyright"
	}
	if checker != "" {
		cargs := []string{"-m", checker}
		if checker == "mypy" {
			if venv, err := tc.VirtualEnvPath(ctx); err == nil && venv != "" {
				if rel, err := filepath.Rel(req.Info.ProgramDirectory, venv); err == nil {
					cargs = append(cargs, "--exclude", rel)
				}
			}
		}
		cargs = append(cargs, req.Info.ProgramDirectory)
		ccmd, err := tc.Command(ctx, cargs...)
		if err != nil {
			return nil, err
		}
		ccmd.Dir, ccmd.Stdout, ccmd.Stderr = req.Info.ProgramDirectory, os.Stdout, os.Stderr
		if err := ccmd.Run(); err != nil {
			return nil, fmt.Errorf("%s failed: %w", checker, err)
		}
	}

	// Cancel on the Cancel RPC or when the request ends.
	runCtx, runCancel := context.WithCancel(host.cancelCtx)
	defer runCancel()
	context.AfterFunc(ctx, runCancel)
	cmd, err := tc.Command(runCtx, args...)
	if err != nil {
		return nil, err
	}
	// SIGTERM: the program ignores SIGINT (runBootstrap), and Python's default for SIGTERM ends it quietly.
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if cfg := req.GetConfig(); cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("failed to serialize configuration: %w", err)
		}
		env = append(env, "PULUMI_CONFIG="+string(b))
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	b, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(env, "PULUMI_CONFIG_SECRET_KEYS="+string(b))

	if err := cmd.Run(); err != nil {
		// Python may die before flushing; make sure the engine sees what it wrote.
		contract.IgnoreError(os.Stdout.Sync())
		contract.IgnoreError(os.Stderr.Sync())
		if runCtx.Err() != nil {
			// Stopped because the update was cancelled: the engine says so; no second message.
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				switch status.ExitStatus() {
				case 0:
					err = fmt.Errorf("program exited unexpectedly: %w", exitErr)
				case exitAfterUserMessage:
					return &pulumirpc.RunResponse{Bail: true}, nil
				default:
					err = fmt.Errorf("program exited with non-zero exit code: %d", status.ExitStatus())
				}
			} else {
				err = fmt.Errorf("program exited unexpectedly: %w", exitErr)
			}
		} else {
			err = fmt.Errorf("problem executing program (could not run language executor): %w", err)
		}
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunPlugin runs Python plugins and policy packs (kind "analyzer", run as `python -u -m pulumi.policy`).
func (host *pythonLanguageHost) RunPlugin(
	req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer,
) error {
	ctx := server.Context()
	isPolicy := req.Kind == string(apitype.AnalyzerPlugin)
	opts, tc, err := optionsOf(req.Info, !isPolicy)
	if err != nil {
		return err
	}

	var args []string
	_, statErr := os.Stat(filepath.Join(opts.Root, "__main__.py"))
	hasMainPy := statErr == nil
	// Only a plugin without __main__.py asks whether the SDK can run it as a module: a Python start (0.6 s of
	// CPU importing pulumi) that a policy pack, started as `-m pulumi.policy` either way, does not need.
	hasRunModule := false
	if !isPolicy && !hasMainPy {
		hasRunModule = true
		if check, err := tc.Command(ctx, "-c", "import pulumi.run.plugin"); err == nil {
			if out, err := check.CombinedOutput(); err != nil && strings.Contains(string(out), "ModuleNotFoundError") {
				hasRunModule = false
			}
		}
	}
	var cmd *exec.Cmd
	switch {
	case isPolicy:
		args = append(append([]string{"-u", "-m", "pulumi.policy"}, req.Args...), req.Info.ProgramDirectory)
		cmd, err = tc.Command(ctx, args...)
	case hasRunModule && !hasMainPy:
		pyproject, perr := toolchain.LoadPyproject(opts.Root)
		if perr != nil {
			return fmt.Errorf("plugin provides neither __main__.py nor a loadable pyproject.toml: %w", perr)
		}
		cmd, err = tc.ModuleCommand(ctx, "pulumi.run.plugin", append([]string{pyproject.Project.Name}, req.Args...)...)
	default:
		cmd, err = tc.Command(ctx, append([]string{req.Info.ProgramDirectory}, req.Args...)...)
	}
	if err != nil {
		return err
	}

	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()

	var proxy *sdk.PolicyProxy
	direct := false
	if isPolicy {
		if direct, err = startsWithoutStackConfig(req.Info); err != nil {
			return err
		}
	}
	switch {
	case direct:
		// The pack prints its own port: the engine talks to it directly, ConfigureStack included.
		cmd.Dir = req.Info.ProgramDirectory
	case isPolicy:
		// Policy packs run from their own directory and need the stack's config; the proxy
		// answers the engine's ConfigureStack call before the Python process starts.
		cmd.Dir = req.Info.ProgramDirectory
		proxy, stdout, err = sdk.NewPolicyProxy(ctx, stdout)
		if err != nil {
			return fmt.Errorf("could not start policy pack proxy: %w", err)
		}
		cfg, err := proxy.AwaitConfiguration(ctx)
		if err != nil {
			return fmt.Errorf("could not get stack configuration: %w", err)
		}
		if cfg != nil {
			set := func(k, v string) {
				if v != "" {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
			}
			set("PULUMI_ORGANIZATION", cfg.Organization)
			set("PULUMI_PROJECT", cfg.Project)
			set("PULUMI_STACK", cfg.Stack)
			set("PULUMI_DRY_RUN", strconv.FormatBool(cfg.DryRun))
			if cfg.Config != nil {
				b, err := json.Marshal(cfg.Config)
				if err != nil {
					return fmt.Errorf("could not marshal stack configuration: %w", err)
				}
				set("PULUMI_CONFIG", string(b))
			}
		}
	default:
		cmd.Dir = req.Pwd
	}
	cmd.Env = append(cmd.Env, req.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	run := func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		if proxy != nil {
			return proxy.Attach(ctx, cmd)
		}
		return cmd.Wait()
	}
	if err := run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				return server.Send(&pulumirpc.RunPluginResponse{
					Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(status.ExitStatus())},
				})
			}
			return fmt.Errorf("program exited unexpectedly: %w", exitErr)
		}
		return fmt.Errorf("problem executing plugin program (could not run language executor): %w", err)
	}
	return closer.Close()
}

func (host *pythonLanguageHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	_, tc, err := optionsOf(req.Info, req.IsPlugin)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.IsTerminal)
	if err != nil {
		return err
	}
	defer closer.Close()
	fmt.Fprint(stdout, "Installing dependencies...\n\n")
	ctx := server.Context()
	if req.IsPlugin {
		if ok, err := toolchain.IsBuildablePackage(req.Info.ProgramDirectory); err != nil {
			return err
		} else if ok {
			if err := tc.EnsureVenv(ctx, req.Info.ProgramDirectory, req.UseLanguageVersionTools, true, stdout, stderr); err != nil {
				return fmt.Errorf("creating virtual environment: %w", err)
			}
			if err := tc.InstallPackage(ctx, req.Info.ProgramDirectory, req.UseLanguageVersionTools, true, stdout, stderr); err != nil {
				return fmt.Errorf("installing package: %w", err)
			}
		}
	}
	if err := tc.InstallDependencies(ctx, req.Info.ProgramDirectory, req.UseLanguageVersionTools, true, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprint(stdout, "Finished installing dependencies\n\n")
	return closer.Close()
}

func (host *pythonLanguageHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	opts := toolchain.PythonOptions{Toolchain: toolchain.Pip}
	if req != nil && req.Info != nil {
		o, _, err := optionsOf(req.Info, false)
		if err != nil {
			return nil, err
		}
		opts = o
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	var info toolchain.Info
	if opts.Toolchain == toolchain.Pip {
		info, err = aboutPip(ctx, tc)
	} else {
		info, err = tc.About(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: info.PythonExecutable,
		Version:    info.PythonVersion.String(),
		Metadata: map[string]string{
			"toolchain":        toolchain.Name(opts.Toolchain),
			"toolchainVersion": info.ToolchainVersion.String(),
			"typechecker":      toolchain.TypeCheckerName(opts.Typechecker),
		},
	}, nil
}

// aboutScript (about.py) prints the interpreter, its version and pip's version, in one Python start.
//
//go:embed about.py
var aboutScript string

// aboutPip is the pip toolchain's About (the interpreter's path and version, pip's version) from one Python
// start. Upstream starts three, one of them `python -m pip --version` (0.3 s of CPU importing pip), on
// every preview and update, for the update's metadata. Like upstream, unparsable versions are left empty.
func aboutPip(ctx context.Context, tc toolchain.Toolchain) (toolchain.Info, error) {
	cmd, err := tc.Command(ctx, "-c", aboutScript)
	if err != nil {
		return toolchain.Info{}, err
	}
	out, err := cmd.Output()
	if err != nil {
		return toolchain.Info{}, fmt.Errorf("asking the program's Python about itself: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for len(lines) < 3 {
		lines = append(lines, "")
	}
	info := toolchain.Info{PythonExecutable: strings.TrimSpace(lines[0])}
	if v, err := toolchain.ParsePythonVersion("Python " + strings.TrimSpace(lines[1])); err == nil {
		info.PythonVersion = v
	}
	if v, err := toolchain.ParsePipVersion("pip " + strings.TrimSpace(lines[2])); err == nil {
		info.ToolchainVersion = v
	}
	return info, nil
}

func (host *pythonLanguageHost) GetProgramDependencies(ctx context.Context,
	req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	_, tc, err := optionsOf(req.Info, false)
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.TransitiveDependencies)
	if err != nil {
		return nil, fmt.Errorf("failed to get python dependencies: %w", err)
	}
	deps := make([]*pulumirpc.DependencyInfo, len(pkgs))
	for i, p := range pkgs {
		deps[i] = &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version}
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: deps}, nil
}
