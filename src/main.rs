//! The `tandem` binary: `serve` speaks JSON-RPC on stdio, `acp` speaks the Agent Client
//! Protocol on stdio, `lsp` the Language Server Protocol on stdio, `run` plays one turn in the
//! terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tandem::config::Config;
use tandem::protocol::Mode;

#[derive(Parser)]
#[command(
    name = "tandem",
    version,
    about = "A coding agent that lives beside the editor"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the native JSON-RPC protocol on stdin/stdout (what editors start), and with
    /// --listen over WebSocket to clients that attach.
    Serve {
        /// TOML config of providers and models (default: the built-in offline demo model).
        #[arg(long, env = "TANDEM_CONFIG")]
        config: Option<PathBuf>,
        /// Where sessions are stored.
        #[arg(long, env = "TANDEM_HOME")]
        data_dir: Option<PathBuf>,
        /// Where to serve: `stdio` (the default) and/or `ws://127.0.0.1:PORT` (PORT 0 picks a
        /// free one). `--listen ws://…` alone serves only WebSocket; add `--listen stdio` for
        /// both. Clients need the token written to DATA_DIR/attach-token.
        #[arg(long, value_parser = tandem::server::listen::parse_listen)]
        listen: Vec<tandem::server::listen::ListenTarget>,
        /// A browser origin allowed to attach over WebSocket (repeatable), e.g.
        /// http://localhost:5173. Requests with any other Origin are refused.
        #[arg(long)]
        allow_origin: Vec<String>,
    },
    /// Speak the Agent Client Protocol (v1) on stdin/stdout, for Zed, JetBrains and the
    /// Neovim/Emacs ACP clients. Same engine and session store as `serve`.
    Acp {
        /// TOML config of providers and models (default: the built-in offline demo model).
        #[arg(long, env = "TANDEM_CONFIG")]
        config: Option<PathBuf>,
        /// Where sessions are stored.
        #[arg(long, env = "TANDEM_HOME")]
        data_dir: Option<PathBuf>,
    },
    /// Speak the Language Server Protocol (3.17) on stdin/stdout, for editors with an LSP client
    /// and no tandem plugin (Helix, Sublime LSP, eglot, Kakoune, Neovim's vim.lsp). Same engine
    /// and session store as `serve`.
    Lsp {
        /// TOML config of providers and models (default: the built-in offline demo model).
        #[arg(long, env = "TANDEM_CONFIG")]
        config: Option<PathBuf>,
        /// Where sessions are stored.
        #[arg(long, env = "TANDEM_HOME")]
        data_dir: Option<PathBuf>,
    },
    /// Run one prompt headless and print the turn readably; approvals are asked on the terminal.
    Run {
        /// The prompt.
        prompt: String,
        #[arg(long, env = "TANDEM_CONFIG")]
        config: Option<PathBuf>,
        /// The workspace folder (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Model id from the config (default: its default_model).
        #[arg(long)]
        model: Option<String>,
        /// Permission mode: ask, autoEdit, plan or fullAuto.
        #[arg(long, default_value = "ask")]
        mode: String,
        /// Approve every request once without asking (for scripts; default is to ask, or deny
        /// when stdin is not a terminal).
        #[arg(long)]
        yes: bool,
    },
    /// Internal: the parent of a stdio MCP server, which ends everything the server started
    /// when it exits or tandem goes (tandem starts it; not for direct use).
    #[command(hide = true, name = "mcp-guard")]
    McpGuard {
        /// The server's program and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Internal: restrict this process with Landlock, then run the command (the shell tool
    /// starts it; not for direct use).
    #[command(hide = true)]
    SandboxExec {
        /// Writable with everything beneath.
        #[arg(long)]
        write: Vec<PathBuf>,
        /// A workspace root: writable except .git/hooks, .git/config and --protect paths.
        #[arg(long)]
        root: Vec<PathBuf>,
        /// Read-only even beneath a root.
        #[arg(long)]
        protect: Vec<PathBuf>,
        /// A private temp dir: writable and exported as TMPDIR.
        #[arg(long)]
        tmp: Option<PathBuf>,
        /// Keep TCP connect and bind allowed.
        #[arg(long)]
        network: bool,
        /// Refuse every socket but TCP (no network namespace holds the command: Landlock alone).
        #[arg(long)]
        seal_sockets: bool,
        /// Stay the command's parent and end everything it leaves running (no PID namespace
        /// holds the command: Landlock alone).
        #[arg(long)]
        supervise: bool,
        /// With --supervise: after SIGINT, how long the command gets before everything is killed.
        #[arg(long, default_value_t = 100)]
        grace_ms: u64,
        /// Only prove that Landlock confines here and print what was proved.
        #[arg(long)]
        probe: bool,
        /// The program and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<std::ffi::OsString>,
    },
}

/// Load the config and prepare the data dir (exit code 2 on either, naming the cause), then run
/// the face `serve` (`serve`, `acp` or `lsp`) to its end.
#[allow(
    clippy::print_stderr,
    reason = "the binary's edge: an error that ends tandem before or after its face runs goes to the terminal"
)]
fn run_face<F, Fut>(
    runtime: &tokio::runtime::Runtime,
    config: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    serve: F,
) -> ExitCode
where
    F: FnOnce(Config, Option<PathBuf>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let config = match load_config(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tandem: {e}");
            return ExitCode::from(2);
        }
    };
    let data_dir = match tandem::store::prepare_data_dir(data_dir.as_deref()) {
        Ok(dir) => Some(dir),
        Err(e) => {
            eprintln!("tandem: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(serve(config, data_dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tandem: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `serve`'s transports from its `--listen` values (none: stdio alone).
fn serve_options(
    listen: &[tandem::server::listen::ListenTarget],
    allowed_origins: Vec<String>,
) -> Result<tandem::server::ServeOptions, String> {
    use tandem::server::listen::{ListenOptions, ListenTarget};
    let mut addresses = listen.iter().filter_map(|target| match target {
        ListenTarget::WebSocket(address) => Some(*address),
        ListenTarget::Stdio => None,
    });
    let websocket = addresses.next();
    if addresses.next().is_some() {
        return Err("--listen takes one ws:// address; give it once".to_owned());
    }
    if websocket.is_none() && !allowed_origins.is_empty() {
        return Err("--allow-origin needs --listen ws://HOST:PORT".to_owned());
    }
    Ok(tandem::server::ServeOptions {
        stdio: listen.is_empty() || listen.contains(&ListenTarget::Stdio),
        websocket: websocket.map(|address| ListenOptions {
            address,
            allowed_origins,
        }),
    })
}

fn load_config(path: Option<PathBuf>) -> Result<Config, String> {
    match path {
        Some(path) => Config::load(&path).map_err(|e| e.to_string()),
        None => Ok(Config::builtin()),
    }
}

/// The mode names of the wire, plus the kebab-case spellings a terminal user may type.
fn parse_mode(text: &str) -> Result<Mode, String> {
    let wire = match text {
        "auto-edit" => "autoEdit",
        "full-auto" => "fullAuto",
        other => other,
    };
    wire.parse()
        .map_err(|e: tandem::protocol::UnknownMode| e.to_string())
}

#[allow(
    clippy::print_stderr,
    reason = "the binary's edge: an error that ends tandem before any face runs goes to the terminal"
)]
fn main() -> ExitCode {
    let cli = Cli::parse();
    // The MCP guard too runs before any runtime exists: it builds its own single-threaded one.
    if let Command::McpGuard { command } = &cli.command {
        let code = tandem::mcp::guard::run(command);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // The sandbox helper runs before any runtime or thread exists: Landlock restricts only the
    // calling thread, and the command it becomes must inherit a single-threaded image.
    if let Command::SandboxExec {
        write,
        root,
        protect,
        tmp,
        network,
        seal_sockets,
        supervise,
        grace_ms,
        probe,
        command,
    } = cli.command
    {
        let code = if probe {
            tandem::tools::landlock::probe()
        } else {
            let spec = tandem::tools::landlock::Spec {
                write,
                roots: root,
                protect,
                tmp,
                network,
                seal_sockets,
                supervise: supervise.then(|| std::time::Duration::from_millis(grace_ms)),
            };
            tandem::tools::landlock::exec(&spec, &command)
        };
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tandem: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match cli.command {
        Command::SandboxExec { .. } | Command::McpGuard { .. } => ExitCode::SUCCESS,
        Command::Serve {
            config,
            data_dir,
            listen,
            allow_origin,
        } => {
            let options = match serve_options(&listen, allow_origin) {
                Ok(options) => options,
                Err(e) => {
                    eprintln!("tandem: {e}");
                    return ExitCode::from(2);
                }
            };
            run_face(&runtime, config, data_dir, move |config, data_dir| {
                tandem::server::serve(config, data_dir, options)
            })
        }
        Command::Lsp { config, data_dir } => {
            run_face(&runtime, config, data_dir, tandem::lsp::serve)
        }
        Command::Acp { config, data_dir } => {
            run_face(&runtime, config, data_dir, tandem::acp::serve)
        }
        Command::Run {
            prompt,
            config,
            cwd,
            model,
            mode,
            yes,
        } => {
            let config = match load_config(config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("tandem: {e}");
                    return ExitCode::from(2);
                }
            };
            let mode = match parse_mode(&mode) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("tandem: {e}");
                    return ExitCode::from(2);
                }
            };
            let cwd = match cwd.map(Ok).unwrap_or_else(std::env::current_dir) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("tandem: cannot read the current directory: {e}");
                    return ExitCode::from(2);
                }
            };
            let options = tandem::cli::RunOptions {
                prompt,
                cwd,
                model,
                mode,
                auto_approve: yes,
            };
            match runtime.block_on(tandem::cli::run(config, options)) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("tandem: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    // stdin is read by a blocking thread that may still wait for input; don't wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}
