//! `lotsync generate-assets` (hidden): the man pages and shell completions the .deb installs,
//! written from the command line's own clap definition so they never drift from it.
//!
//! `packaging/deb-check` runs it after the release build; `[package.metadata.deb]` in Cargo.toml
//! takes the files from where it writes them. Compressing the man pages is left to cargo-deb.

use anyhow::Context;
use clap_complete::Shell;
use std::path::PathBuf;

/// Arguments of `lotsync generate-assets`.
#[derive(Debug, clap::Args)]
pub struct AssetsArgs {
    /// Folder to write into (created if missing): `man/lotsync.1` with a page per subcommand,
    /// and `completions/lotsync.bash`, `_lotsync` (zsh) and `lotsync.fish`.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes the man pages and completions of `cmd` (the whole `lotsync` command line).
pub fn generate_assets(args: AssetsArgs, cmd: clap::Command) -> anyhow::Result<u8> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // One page for lotsync and one per visible subcommand (lotsync-run.1, ...), as git does:
    // the first page only lists the subcommands, each one's options are on its own page.
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("cannot write the man pages into {}", man.display()))?;
    let mut cmd = without_hidden_subcommands(&cmd);
    let name = cmd.get_name().to_string();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, &name, &completions).with_context(|| {
            format!(
                "cannot write the {shell} completion into {}",
                completions.display()
            )
        })?;
    }
    Ok(0)
}

/// `cmd` less its hidden subcommands (this one): clap_mangen leaves them out by itself, but
/// clap_complete would offer them. Only what completion reads is kept: the arguments and the
/// visible subcommands, under the name and version main.rs gives `lotsync`.
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    clap::Command::new("lotsync")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_pages_and_completions_without_the_hidden_subcommand() {
        let cmd = clap::Command::new("lotsync")
            .version("1.0")
            .subcommand(clap::Command::new("check").about("Read exports"))
            .subcommand(clap::Command::new("secret").hide(true));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        generate_assets(AssetsArgs { dir: dir.clone() }, cmd).unwrap();

        let read = |path: &str| std::fs::read_to_string(dir.join(path)).unwrap();
        assert!(read("man/lotsync.1").contains("lotsync\\-check(1)"));
        assert!(read("man/lotsync-check.1").contains("Read exports"));
        assert!(!dir.join("man/lotsync-secret.1").exists());
        for file in ["lotsync.bash", "_lotsync", "lotsync.fish"] {
            let completion = read(&format!("completions/{file}"));
            assert!(completion.contains("check"), "{file}");
            assert!(!completion.contains("secret"), "{file}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
