//! `tolk`: the broker binary. Reads the configuration, starts the router, the HTTP server and
//! every enabled protocol front end, and shuts them down gracefully on SIGINT/SIGTERM.

mod config;
mod http;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use tolk_core::frontend::FrontEndContext;
use tolk_core::{Metrics, Router};
use tracing::{info, warn};

use crate::config::{Config, DEFAULT_CONFIG};

/// A multi-protocol IoT broker: MQTT, MQTT-SN, STOMP, AMQP 0.9.1 and WS-Notification share one
/// topic space.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file (TOML). Without it, the built-in defaults are used.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the default configuration, with every setting documented, and exit.
    #[arg(long, conflicts_with_all = ["config", "check_config"])]
    print_default_config: bool,
    /// Check the configuration file and exit: status 0 if it is valid.
    #[arg(long)]
    check_config: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Add or update a user in a password file (mosquitto_passwd's format, which Mosquitto
    /// reads too). The password is read from standard input, one line, unless given.
    Passwd {
        /// The password file; created if missing.
        file: PathBuf,
        /// The user name.
        user: String,
        /// The password (as mosquitto_passwd -b; it then shows in the process list).
        #[arg(long)]
        password: Option<String>,
        /// Remove the user instead.
        #[arg(long, conflicts_with = "password")]
        delete: bool,
        /// PBKDF2-HMAC-SHA512 rounds.
        #[arg(long, default_value_t = tolk_auth::password_file::DEFAULT_ITERATIONS)]
        iterations: u32,
        /// Hash with argon2id instead (Mosquitto 2.1 reads it; 2.0 does not). Each uncached
        /// login then costs about 7 MiB and a few milliseconds.
        #[arg(long, conflicts_with_all = ["delete", "iterations"])]
        argon2id: bool,
    },
}

/// Which hash `tolk passwd` writes.
enum Hashing {
    /// `$7$` with this many rounds (mosquitto_passwd's default).
    Pbkdf2(u32),
    /// `$argon2id$`.
    Argon2id,
}

/// `tolk passwd`: sets or removes one user's hash.
fn passwd(file: &std::path::Path, user: &str, password: Option<String>, delete: bool, hashing: Hashing) -> ExitCode {
    use tolk_auth::password_file::{self, PasswordHash};
    let result = if delete {
        password_file::update(file, user, None)
    } else {
        let password = match password {
            Some(password) => password,
            None => {
                let mut line = String::new();
                if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                    eprint!("password for {user} (shown as typed): ");
                }
                if let Err(e) = std::io::stdin().read_line(&mut line) {
                    eprintln!("tolk passwd: cannot read the password: {e}");
                    return ExitCode::from(2);
                }
                line.trim_end_matches(['\n', '\r']).to_owned()
            }
        };
        let hash = match hashing {
            Hashing::Argon2id => PasswordHash::new_argon2id(password.as_bytes()),
            Hashing::Pbkdf2(iterations) => match std::num::NonZeroU32::new(iterations) {
                Some(iterations) => PasswordHash::new_pbkdf2(password.as_bytes(), iterations),
                None => Err("--iterations must be at least 1".to_owned()),
            },
        };
        hash.and_then(|hash| password_file::update(file, user, Some(&hash)))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tolk passwd: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Passwd { file, user, password, delete, iterations, argon2id }) = cli.command {
        let hashing = if argon2id { Hashing::Argon2id } else { Hashing::Pbkdf2(iterations) };
        return passwd(&file, &user, password, delete, hashing);
    }
    if cli.print_default_config {
        print!("{DEFAULT_CONFIG}");
        return ExitCode::SUCCESS;
    }
    let config = match &cli.config {
        Some(path) => Config::load(path),
        None => Ok(Config::default()),
    };
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            eprintln!("tolk: {e:#}");
            return ExitCode::from(2);
        }
    };
    if cli.check_config {
        println!("configuration is valid");
        return ExitCode::SUCCESS;
    }
    init_logging(&config.log.level);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tolk: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("tolk: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

async fn run(config: Config) -> anyhow::Result<()> {
    // Installed first, so that a stop requested right after readiness is handled gracefully.
    let stop = stop_signal()?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data_dir {}", config.data_dir.display()))?;
    let metrics = Arc::new(Metrics::new());
    let router = Router::new(config.core.clone(), metrics.clone());
    router.set_node_name(&config.node_name());
    let store = open_store(&config, &router)?;
    let mut ctx = FrontEndContext::new(router, config.data_dir.clone());
    let tls = config.tls.clone().map(tolk_tls::Tls::load).transpose()?;
    ctx.tls = tls.clone();
    let users = match &config.auth {
        Some(auth) => {
            let users = Arc::new(tolk_auth::Users::load(auth.clone()).map_err(anyhow::Error::msg)?);
            ctx.auth = users.clone();
            Some(users)
        }
        None => {
            warn!("no [auth] section: every client may connect and do anything; see docs/security.md");
            None
        }
    };
    if tls.is_some() || users.is_some() {
        spawn_reload_on_hangup(tls, users, &ctx)?;
    }

    // Every front end starts; those served on the HTTP port hand back their routes, and the
    // HTTP server binds last, with all of them, and tells the front ends where it is.
    let http_users = config.http.require_auth.then(|| ctx.auth.clone());
    let mut app = http::routes(metrics.clone(), http_users);
    for front_end in config.front_ends() {
        let name = front_end.name();
        let started = front_end.start(ctx.clone()).await?;
        if !started.addrs.is_empty() {
            info!(listener = name, addresses = ?started.addrs, "listening");
        }
        if let Some(routes) = started.routes {
            app = app.merge(routes);
        }
    }
    if config.http.enabled {
        let addrs =
            http::serve(&config.http, app, metrics.clone(), ctx.shutdown.clone(), &ctx.tracker, ctx.tls.clone())
                .await?;
        let _ = ctx.http_addr.set(addrs[0]);
        info!(listener = "http", addresses = ?addrs, "listening");
    }
    info!(version = env!("CARGO_PKG_VERSION"), "tolk ready");
    notify_systemd(&[sd_notify::NotifyState::Ready]);

    stop.await?;
    info!("stop signal received; draining connections");
    notify_systemd(&[sd_notify::NotifyState::Stopping]);
    ctx.shutdown.cancel();
    ctx.tracker.close();
    let drain = config.shutdown.drain_timeout;
    if tokio::time::timeout(drain, ctx.tracker.wait()).await.is_err() {
        warn!(tasks = ctx.tracker.len(), "drain timeout of {drain:?} passed; closing the remaining connections");
    }
    if let Some(store) = store {
        store.close();
    }
    info!("tolk stopped");
    Ok(())
}

/// Opens the durable store (`[storage]`, on by default) and gives the router what it kept.
fn open_store(config: &Config, router: &Router) -> anyhow::Result<Option<Arc<tolk_store::FjallStore>>> {
    if !config.storage.enabled {
        warn!("[storage] enabled = false: retained messages and durable queues do not survive a restart");
        return Ok(None);
    }
    let dir = config.data_dir.join("store");
    let started = std::time::Instant::now();
    let store = tolk_store::FjallStore::open(&dir, &config.storage)
        .with_context(|| format!("cannot open the store in {}", dir.display()))?;
    let restored = router.attach_store(store.clone())?;
    info!(
        retained = restored.retained,
        queues = restored.queues,
        queued = restored.queued,
        elapsed = ?started.elapsed(),
        directory = %dir.display(),
        "store opened"
    );
    Ok(Some(store))
}

/// Tells systemd (`Type=notify` units) about readiness and shutdown; a no-op elsewhere.
fn notify_systemd(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        warn!(error = %e, "cannot notify systemd");
    }
}

/// Reloads the TLS certificates and the password file on every SIGHUP: new handshakes and
/// logins use the new files, established connections carry on, and files that do not load
/// leave the old ones in force.
fn spawn_reload_on_hangup(
    tls: Option<Arc<tolk_tls::Tls>>,
    users: Option<Arc<tolk_auth::Users>>,
    ctx: &FrontEndContext,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    let shutdown = ctx.shutdown.clone();
    ctx.tracker.spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                received = hangup.recv() => if received.is_none() { return },
            }
            if let Some(tls) = &tls {
                match tls.reload() {
                    Ok(()) => info!("SIGHUP: TLS certificates reloaded"),
                    Err(e) => warn!(error = %e, "SIGHUP: TLS certificates not reloaded; the previous ones stay in use"),
                }
            }
            if let Some(users) = &users {
                match users.reload() {
                    Ok(what) => info!("SIGHUP: reloaded {what}"),
                    Err(e) => warn!(error = %e, "SIGHUP: [auth] files not reloaded; the previous ones stay"),
                }
            }
        }
    });
    Ok(())
}

/// Resolves on SIGINT or SIGTERM. The handlers are registered when this is called, not when
/// the future is first polled.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = anyhow::Result<()>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        Ok(())
    })
}
