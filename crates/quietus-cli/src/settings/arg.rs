//! A row of the settings table as the command line reads it: its clap argument (flag, short
//! flag, variable, value name, parser, default, help) and the value clap read.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches};
use quietus::{Containment, Signal};

use super::def::{Def, Default, Item, Kind, SettingValue};
use super::parse::{self, SoloCap, path, split_list, text};
use crate::probe::ProbeCommand;

impl Def {
    /// The setting's `--help` line and its longer text.
    fn help(&self) -> (String, String) {
        let help = match self.range_text(self.range) {
            Some(range) => format!("{} ({range}).", self.doc.trim_end_matches('.')),
            None => self.doc.to_owned(),
        };
        let mut facts = Vec::new();
        if let Some(range) = self.range_text(self.range) {
            let none = if self.kind == Kind::DurationOrNone {
                "; `none` turns it off"
            } else {
                ""
            };
            facts.push(format!("Accepts {range}{none}."));
        }
        if let Default::Words(words) = self.default {
            facts.push(format!("Default: {words}."));
        }
        let mut long_help = format!("{}\n\n", self.doc);
        if !facts.is_empty() {
            long_help.push_str(&facts.join(" "));
            long_help.push('\n');
        }
        long_help.push_str(self.long_doc);
        (help, long_help)
    }

    /// The setting's clap argument (its id is [`name`](Self::name)), if it has a flag.
    pub(crate) fn arg(&self, order: usize) -> Option<Arg> {
        let flag = self.flag.on()?;
        let (help, long_help) = self.help();
        let mut arg = Arg::new(self.name)
            .long(flag)
            .help(help)
            .long_help(long_help)
            .display_order(order);
        if let Some(short) = self.short {
            arg = arg.short(short);
        }
        if let Some(env) = self.env {
            arg = arg.env(env);
        }
        arg = match self.kind {
            Kind::Duration => arg
                .value_name("D")
                .allow_hyphen_values(true)
                .value_parser(parse::duration_parser()),
            Kind::DurationOrNone => arg
                .value_name("D")
                .allow_hyphen_values(true)
                .value_parser(parse::duration_or_none_parser()),
            Kind::Switch => arg
                .action(ArgAction::SetTrue)
                .value_parser(parse::flag_parser()),
            Kind::ExitCode => arg
                .value_name("N")
                .value_parser(clap::builder::ValueParser::new(parse::parse_exit_code)),
            Kind::Signal => arg
                .value_name("SIG")
                .value_parser(text(parse::parse_signal)),
            Kind::Containment => arg
                .value_name("MODE")
                .value_parser(text(parse::parse_containment)),
            Kind::List(item) => list_arg(arg, item),
        };
        if let (Default::Value(value), false) = (self.default, self.kind == Kind::DurationOrNone) {
            arg = arg.default_value(value);
        }
        Some(arg)
    }

    /// The value clap read for this setting, if any (a switch: only when set; a list: only
    /// when not empty). A list from the variable is split at `:` where the item says so.
    pub(crate) fn read_matches(&self, matches: &ArgMatches) -> Option<SettingValue> {
        let id = self.name;
        let one = |value: SettingValue| Some(value);
        match self.kind {
            Kind::Duration => one(SettingValue::Duration(*matches.get_one::<Duration>(id)?)),
            Kind::DurationOrNone => one(SettingValue::DurationOrNone(
                *matches.get_one::<Option<Duration>>(id)?,
            )),
            Kind::Switch => one(SettingValue::Switch(matches.get_flag(id))),
            Kind::ExitCode => one(SettingValue::ExitCode(*matches.get_one::<u8>(id)?)),
            Kind::Signal => one(SettingValue::Signal(*matches.get_one::<Signal>(id)?)),
            Kind::Containment => one(SettingValue::Containment(
                *matches.get_one::<Containment>(id)?,
            )),
            Kind::List(item) => read_list(matches, id, item),
        }
    }
}

/// A repeatable option's argument, its value parsed as `item`.
fn list_arg(arg: Arg, item: Item) -> Arg {
    let arg = arg.value_name(item.value_name()).action(ArgAction::Append);
    match item {
        Item::Folder => arg.value_parser(path(parse::parse_watch)),
        Item::File => arg.value_parser(path(|p| Ok(PathBuf::from(p)))),
        Item::Glob => arg.value_parser(text(parse::parse_glob)),
        Item::Regex => arg
            .allow_hyphen_values(true)
            .value_parser(text(|regex| Ok(regex.to_owned()))),
        Item::SoloCap => arg.value_parser(text(parse::parse_solo_caps)),
        Item::Probe => arg
            .allow_hyphen_values(true)
            .value_parser(text(crate::probe::parse)),
    }
}

/// The values of a repeatable option (none: `None`); the variable's one value split at `:`
/// where `item` says so.
fn read_list(matches: &ArgMatches, id: &str, item: Item) -> Option<SettingValue> {
    let from_env = matches.value_source(id) == Some(ValueSource::EnvVariable);
    let split = from_env && item.splits();
    match item {
        Item::Folder | Item::File => {
            let paths: Vec<PathBuf> = matches.get_many::<PathBuf>(id)?.cloned().collect();
            let paths = if split {
                let all: OsString = paths.iter().map(|p| p.as_os_str()).collect();
                split_list(&all).into_iter().map(PathBuf::from).collect()
            } else {
                paths
            };
            (!paths.is_empty()).then_some(SettingValue::Paths(paths))
        }
        Item::Glob | Item::Regex => {
            let texts: Vec<String> = matches.get_many::<String>(id)?.cloned().collect();
            let texts = if split {
                let all = OsString::from(texts.concat());
                split_list(&all)
                    .into_iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect()
            } else {
                texts
            };
            (!texts.is_empty()).then_some(SettingValue::Texts(texts))
        }
        Item::SoloCap => {
            let caps: Vec<SoloCap> = matches
                .get_many::<Vec<SoloCap>>(id)?
                .flatten()
                .cloned()
                .collect();
            (!caps.is_empty()).then_some(SettingValue::SoloCaps(caps))
        }
        Item::Probe => {
            let probes: Vec<ProbeCommand> =
                matches.get_many::<ProbeCommand>(id)?.cloned().collect();
            (!probes.is_empty()).then_some(SettingValue::Probes(probes))
        }
    }
}
