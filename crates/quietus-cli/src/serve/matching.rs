//! Wrapper-aware command matching: which program a command line really runs, seen through
//! `VAR=value` prefixes, `env`, and the JavaScript package runners (`npx`, `pnpx`, `bunx`,
//! `pnpm`, `npm exec`, `yarn`), so that a list of program names (`playwright`, `codex`)
//! matches `npx playwright test` and `FOO=1 codex run` alike.

use std::path::Path;

/// How many wrappers deep the matcher looks (`env npx pnpm …`).
const MAX_DEPTH: usize = 8;

/// A list of program names that commands are matched against: everything, nothing, or the
/// names given (base names, compared exactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandFilter {
    /// Every command matches.
    All,
    /// No command matches.
    None,
    /// A command matches when one of the programs it runs has one of these base names.
    Names(Vec<String>),
}

impl CommandFilter {
    /// `all`, `none`, or names separated by commas (`playwright,codex`).
    pub(crate) fn parse(text: &str) -> Result<CommandFilter, String> {
        match text.trim() {
            "all" => Ok(CommandFilter::All),
            "none" => Ok(CommandFilter::None),
            list => {
                let names: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect();
                if names.is_empty() || names.iter().any(|n| n.contains('/')) {
                    return Err(format!(
                        "{} is not a command list; it accepts all, none, or program \
                         base names separated by commas (playwright,codex)",
                        crate::jsonrpc::protocol::quote_str(text)
                    ));
                }
                Ok(CommandFilter::Names(names))
            }
        }
    }

    /// Whether `argv` matches: the base name of the program it runs, or of one of the
    /// wrappers it goes through, is on the list.
    pub(crate) fn matches<S: AsRef<str>>(&self, argv: &[S]) -> bool {
        match self {
            CommandFilter::All => true,
            CommandFilter::None => false,
            CommandFilter::Names(names) => {
                programs(argv).iter().any(|p| names.iter().any(|n| n == p))
            }
        }
    }
}

/// The base names of the programs `argv` goes through, outermost first: the wrappers, then the
/// program they run (`npx -y playwright@1.40 test` → `npx`, `playwright`).
pub(crate) fn programs<S: AsRef<str>>(argv: &[S]) -> Vec<String> {
    let words: Vec<&str> = argv.iter().map(AsRef::as_ref).collect();
    let mut rest = &words[..];
    let mut found = Vec::new();
    for _ in 0..MAX_DEPTH {
        rest = skip_assignments(rest);
        let Some((first, after)) = rest.split_first() else {
            break;
        };
        let name = base_name(first);
        found.push(name.clone());
        match unwrap(&name, after) {
            Some(inner) => rest = inner,
            None => break,
        }
    }
    found
}

/// What a wrapper runs: the words from its program on, or `None` when `name` is no wrapper
/// (or runs nothing recognisable).
fn unwrap<'a>(name: &str, args: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match name {
        "env" => Some(skip_env_options(args)),
        "npx" | "pnpx" | "bunx" => Some(skip_options(args)),
        "npm" => {
            let args = skip_options(args);
            match args.split_first() {
                Some((&("exec" | "x"), rest)) => Some(skip_options(rest)),
                _ => None,
            }
        }
        "pnpm" | "yarn" => {
            let args = skip_options(args);
            match args.split_first() {
                Some((&("exec" | "dlx" | "x" | "run"), rest)) => Some(skip_options(rest)),
                Some(_) => Some(args), // `yarn playwright test`: yarn runs the package's bin
                None => None,
            }
        }
        _ => None,
    }
}

/// Skips leading `NAME=value` words (a shell's environment prefix).
fn skip_assignments<'a>(words: &'a [&'a str]) -> &'a [&'a str] {
    let count = words.iter().take_while(|w| is_assignment(w)).count();
    &words[count..]
}

/// `NAME=value` with NAME a shell variable name.
fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `env`'s options and assignments: `-i`, `-u NAME`, `-C DIR`, `--unset=NAME`, `--`, `A=b`.
fn skip_env_options<'a>(words: &'a [&'a str]) -> &'a [&'a str] {
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word == "--" {
            return skip_assignments(&words[i + 1..]);
        }
        if matches!(
            word,
            "-u" | "-C" | "--unset" | "--chdir" | "-S" | "--split-string"
        ) {
            i += 2; // the option's value follows
        } else if word.starts_with('-') || is_assignment(word) {
            i += 1;
        } else {
            break;
        }
    }
    &words[i.min(words.len())..]
}

/// A package runner's options before the package: `-y`, `--yes`, `--package=x`, `--`.
/// (`-p NAME` / `--package NAME` name a package to install, not the one to run.)
fn skip_options<'a>(words: &'a [&'a str]) -> &'a [&'a str] {
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word == "--" {
            return &words[i + 1..];
        }
        if matches!(
            word,
            "-p" | "--package" | "-c" | "--call" | "--filter" | "-F"
        ) {
            i += 2;
        } else if word.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    &words[i.min(words.len())..]
}

/// The program's base name: the last path component, without a package version
/// (`./node_modules/.bin/playwright` → `playwright`, `@playwright/test@1.40` → `test`,
/// `playwright@latest` → `playwright`).
fn base_name(word: &str) -> String {
    let unversioned = match word.rfind('@') {
        Some(at) if at > 0 => &word[..at],
        _ => word,
    };
    Path::new(unversioned)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| unversioned.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> CommandFilter {
        CommandFilter::parse(list).expect("a valid list")
    }

    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    #[test]
    fn plain_programs_match_by_base_name() {
        let filter = names("playwright,codex");
        assert!(filter.matches(&words("codex exec go")));
        assert!(filter.matches(&words("/usr/local/bin/codex")));
        assert!(filter.matches(&words("./node_modules/.bin/playwright test")));
        assert!(!filter.matches(&words("claude -p codex")));
        assert!(!filter.matches(&words("codex-cli run")));
        assert!(!filter.matches::<&str>(&[]));
    }

    #[test]
    fn sees_through_environment_prefixes_and_env() {
        let filter = names("codex");
        assert!(filter.matches(&words("FOO=1 codex run")));
        assert!(filter.matches(&words("FOO=1 BAR_2=x=y codex")));
        assert!(filter.matches(&words("env FOO=1 codex run")));
        assert!(filter.matches(&words("/usr/bin/env -i -u HOME A=b -- codex")));
        assert!(filter.matches(&words("env -C /tmp codex")));
        assert!(!filter.matches(&words("env FOO=1")));
        assert!(
            !filter.matches(&words("1FOO=1 codex")),
            "not a variable name"
        );
    }

    #[test]
    fn sees_through_package_runners() {
        let filter = names("playwright");
        for line in [
            "npx playwright test",
            "npx -y playwright@1.40.0 test",
            "npx --yes -- playwright test",
            "npx -p @playwright/test playwright test",
            "pnpx playwright test",
            "bunx playwright test",
            "pnpm exec playwright test",
            "pnpm dlx playwright test",
            "pnpm playwright test",
            "npm exec playwright test",
            "npm exec -- playwright test",
            "npm x -y playwright",
            "yarn playwright test",
            "yarn dlx playwright test",
            "yarn run playwright",
            "CI=1 env DEBUG=pw:api npx playwright test",
        ] {
            assert!(filter.matches(&words(line)), "{line}");
        }
        for line in ["npm run playwright", "npx jest playwright", "npm test"] {
            assert!(!filter.matches(&words(line)), "{line}");
        }
    }

    #[test]
    fn wrappers_are_names_too() {
        assert_eq!(
            programs(&words("FOO=1 env npx -y @scope/tool@2 run")),
            ["env", "npx", "tool"]
        );
        assert!(names("npx").matches(&words("npx playwright test")));
        assert!(names("tool").matches(&words("npx @scope/tool@2")));
    }

    #[test]
    fn all_and_none() {
        assert!(CommandFilter::All.matches(&words("anything")));
        assert!(!CommandFilter::None.matches(&words("anything")));
        assert_eq!(CommandFilter::parse(" all "), Ok(CommandFilter::All));
        assert_eq!(
            CommandFilter::parse("a, b,,"),
            Ok(CommandFilter::Names(vec!["a".into(), "b".into()]))
        );
        let error = CommandFilter::parse(",").unwrap_err();
        assert!(error.contains("accepts all, none"), "{error}");
        assert!(CommandFilter::parse("bin/codex").is_err());
    }
}
