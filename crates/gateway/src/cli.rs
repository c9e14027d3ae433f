//! The command line, through argh: a derive parser made for small binaries (clap took about
//! 0.2 MB of the Pi binary, docs/deploy-pi.md "Binary size"). argh has no conflict rules or
//! `--version` of its own; [`Cli::parse`] adds both.

use std::path::PathBuf;

use argh::FromArgs;

/// A multi-protocol IoT broker: MQTT, MQTT-SN, STOMP, AMQP 0.9.1 and WS-Notification share one
/// topic space.
#[derive(Debug, FromArgs)]
pub struct Cli {
    /// configuration file (TOML); without it, the built-in defaults are used
    #[argh(option, short = 'c', arg_name = "FILE")]
    pub config: Option<PathBuf>,
    /// print the default configuration, with every setting documented, and exit
    #[argh(switch)]
    pub print_default_config: bool,
    /// check the configuration file and exit: status 0 if it is valid
    #[argh(switch)]
    pub check_config: bool,
    /// print the version and exit
    #[argh(switch, short = 'V')]
    pub version: bool,
    #[argh(subcommand)]
    pub command: Option<Command>,
}

/// A subcommand.
#[derive(Debug, FromArgs)]
#[argh(subcommand)]
pub enum Command {
    /// `tolk passwd`.
    Passwd(Passwd),
}

/// Add or update a user in a password file (mosquitto_passwd's format, which Mosquitto reads
/// too). The password is read from standard input, one line, unless given.
#[derive(Debug, FromArgs)]
#[argh(subcommand, name = "passwd")]
pub struct Passwd {
    /// the password file; created if missing
    #[argh(positional)]
    pub file: PathBuf,
    /// the user name
    #[argh(positional)]
    pub user: String,
    /// the password (as mosquitto_passwd -b; it then shows in the process list)
    #[argh(option)]
    pub password: Option<String>,
    /// remove the user instead
    #[argh(switch)]
    pub delete: bool,
    /// PBKDF2-HMAC-SHA512 rounds (default 101, as mosquitto_passwd)
    #[argh(option)]
    pub iterations: Option<u32>,
    /// hash with argon2id instead (Mosquitto 2.1 reads it; 2.0 does not); each uncached login
    /// then costs about 7 MiB and a few milliseconds
    #[argh(switch)]
    pub argon2id: bool,
}

impl Cli {
    /// The command line, or the exit the process makes instead: help, the version, or a usage
    /// error (status 2, as clap and most tools).
    pub fn parse() -> Result<Cli, (String, u8)> {
        let args: Vec<String> = std::env::args().collect();
        let command = args.first().map(|a| a.rsplit('/').next().unwrap_or(a)).unwrap_or("tolk");
        let rest: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
        let cli = match Cli::from_args(&[command], &rest) {
            Ok(cli) => cli,
            Err(early) if early.status.is_ok() => return Err((early.output, 0)),
            Err(early) => return Err((early.output, 2)),
        };
        if cli.version {
            return Err((format!("tolk {}", env!("CARGO_PKG_VERSION")), 0));
        }
        cli.conflicts().map_err(|e| (format!("{e}\nRun {command} --help for more information."), 2))?;
        Ok(cli)
    }

    fn conflicts(&self) -> Result<(), String> {
        if self.print_default_config && (self.config.is_some() || self.check_config) {
            return Err("--print-default-config cannot be used with --config or --check-config".into());
        }
        if let Some(Command::Passwd(p)) = &self.command {
            if p.delete && p.password.is_some() {
                return Err("--delete cannot be used with --password".into());
            }
            if p.argon2id && (p.delete || p.iterations.is_some()) {
                return Err("--argon2id cannot be used with --delete or --iterations".into());
            }
        }
        Ok(())
    }
}
