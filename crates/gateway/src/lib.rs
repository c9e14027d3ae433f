//! The tolk broker, all but its entry point: reads the configuration, starts the router, the
//! HTTP server and every enabled protocol front end, and shuts them down gracefully on
//! SIGINT/SIGTERM. A library, so that the binary's own crate holds nothing but `main` (see the
//! `tolk` package: the crate a program is optimised as, under fat LTO, sets the level for all
//! of it, and this one is built for size).

mod cli;
mod config;
mod dashboard;
mod http;
mod log_fields;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tolk_core::frontend::FrontEndContext;
use tolk_core::{Metrics, Router};
use tracing::{info, warn};

use crate::cli::{Cli, Command};
use crate::config::{Config, DEFAULT_CONFIG};

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

/// Runs the `tolk` command line: the broker, or one of its subcommands; the process's exit
/// status.
pub fn main() -> ExitCode {
    let cli = match Cli::parse() {
        Ok(cli) => cli,
        Err((text, 0)) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        Err((text, status)) => {
            eprintln!("{text}");
            return ExitCode::from(status);
        }
    };
    if let Some(Command::Passwd(p)) = cli.command {
        let iterations = p.iterations.unwrap_or(tolk_auth::password_file::DEFAULT_ITERATIONS);
        let hashing = if p.argon2id { Hashing::Argon2id } else { Hashing::Pbkdf2(iterations) };
        return passwd(&p.file, &p.user, p.password, p.delete, hashing);
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

/// Logs to stderr at `level` (checked with the configuration), or at `RUST_LOG` when that is
/// set and valid. Per-module directives only (`tracing`'s `Targets`): the regex-based
/// `EnvFilter` would add about 0.9 MB to the Pi binaries (docs/deploy-pi.md, "Binary size").
/// lapin (the AMQP bridge's client) and async_nats (the cluster's) are silent unless named:
/// they log every connection attempt, and the bridge or cluster already logs each reason once.
fn init_logging(level: &str) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let parse = |spec: String| spec.parse::<Targets>().ok().map(|filter| (filter, spec));
    let env = std::env::var("RUST_LOG").ok().filter(|spec| !spec.is_empty());
    let from_env = env.clone().and_then(parse);
    let bad_env = env.is_some() && from_env.is_none();
    // `level` was checked with the configuration.
    let (mut filter, spec) = from_env
        .or_else(|| parse(level.to_owned()))
        .unwrap_or_else(|| (Targets::new().with_default(LevelFilter::INFO), String::new()));
    for quiet in ["lapin", "async_nats"] {
        if !spec.contains(quiet) {
            filter = filter.with_target(quiet, LevelFilter::OFF);
        }
    }
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer()
        .fmt_fields(log_fields::ConnectionFields::default())
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    tracing_subscriber::registry().with(fmt).with(filter).init();
    if bad_env {
        tracing::warn!("RUST_LOG is not a list of level directives (e.g. info,tolk_mqtt=debug); using [log] level");
    }
}

async fn run(config: Config) -> anyhow::Result<()> {
    // Installed first, so that a stop requested right after readiness is handled gracefully.
    let stop = stop_signal()?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data_dir {}", config.data_dir.display()))?;
    let metrics = Arc::new(Metrics::new());
    let router = Router::new(config.core.clone(), metrics.clone());
    router.set_node_name(&config.node_name());
    if let Some(transcoder) = config.transcoder(metrics.clone())? {
        router.set_transcoder(transcoder);
    }
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
