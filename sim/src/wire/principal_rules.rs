//! Kafka's `ssl.principal.mapping.rules`: how the subject of a client
//! certificate becomes the principal's name. A list of rules separated by
//! commas, tried in order; the first that applies gives the name:
//!
//! - `DEFAULT` applies to every subject and gives it whole
//!   (`CN=alice,OU=eng,O=Acme`);
//! - `RULE:pattern/replacement/` applies to a subject the regular
//!   expression `pattern` matches whole, and gives the subject with the
//!   pattern replaced by `replacement`, in which `$1` is the first group
//!   (a group number past the pattern's groups is read as a shorter one
//!   and digits, as Kafka reads it); `/L` or `/U` after it gives the name
//!   in lower or upper case. `\` escapes a `/` in either part.
//!
//! A subject no rule applies to has no principal: its connection is
//! closed, as Kafka refuses it. `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`
//! names a service by its common name and everyone else by the whole
//! subject. Patterns are read by the `regex` crate: Java's syntax but for
//! look-around and back-references, which are refused.

use regex::Regex;
use std::fmt;
use std::str::FromStr;

/// A parsed list of mapping rules; [`PrincipalRules::default`] is Kafka's
/// default, `DEFAULT`.
#[derive(Clone)]
pub struct PrincipalRules {
    rules: Vec<Rule>,
    /// As written, for messages.
    text: String,
}

#[derive(Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        /// In the `regex` crate's syntax: `${n}` for a group, `$$` for `$`.
        replacement: String,
        case: Case,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Kept,
    Lower,
    Upper,
}

impl Default for PrincipalRules {
    fn default() -> Self {
        PrincipalRules {
            rules: vec![Rule::Default],
            text: "DEFAULT".to_string(),
        }
    }
}

impl fmt::Debug for PrincipalRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrincipalRules({:?})", self.text)
    }
}

impl PrincipalRules {
    /// The name the first rule that applies gives `subject`; `None` if
    /// none applies.
    pub fn name(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(subject.to_string()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => {
                let whole = pattern
                    .find(subject)
                    .is_some_and(|m| m.start() == 0 && m.end() == subject.len());
                if !whole {
                    return None;
                }
                let name = pattern.replace_all(subject, replacement.as_str());
                Some(match case {
                    Case::Kept => name.into_owned(),
                    Case::Lower => name.to_lowercase(),
                    Case::Upper => name.to_uppercase(),
                })
            }
        })
    }
}

impl fmt::Display for PrincipalRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for PrincipalRules {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (rule, after) = if let Some(after) = rest.strip_prefix("DEFAULT") {
                (Some(Rule::Default), after)
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (rule, after) = replace_rule(after)?;
                (Some(rule), after)
            } else {
                // An empty rule (two commas) is skipped, as Kafka skips it.
                (None, rest)
            };
            // Up to the next comma: only blanks may come before it.
            let (this, next) = match after.find(',') {
                Some(i) => (&after[..i], &after[i + 1..]),
                None => (after, ""),
            };
            if !this.trim().is_empty() {
                return Err(format!(
                    "{:?}: not a rule (DEFAULT or RULE:pattern/replacement/[LU])",
                    rest[..rest.len() - next.len()].trim().trim_end_matches(',')
                ));
            }
            rules.extend(rule);
            rest = next.trim_start();
        }
        if rules.is_empty() {
            return Err("no rule given: DEFAULT or RULE:pattern/replacement/[LU]".into());
        }
        Ok(PrincipalRules {
            rules,
            text: text.trim().to_string(),
        })
    }
}

/// The rest of `RULE:` (its pattern, replacement and case), and what
/// follows it.
fn replace_rule(text: &str) -> Result<(Rule, &str), String> {
    let unfinished = || format!("RULE:{text}: a rule is RULE:pattern/replacement/[LU]");
    let (pattern, after) = up_to_slash(text).ok_or_else(unfinished)?;
    let (replacement, after) = up_to_slash(after).ok_or_else(unfinished)?;
    let (case, after) = match after.as_bytes().first() {
        Some(b'L') => (Case::Lower, &after[1..]),
        Some(b'U') => (Case::Upper, &after[1..]),
        _ => (Case::Kept, after),
    };
    let compiled = Regex::new(pattern).map_err(|e| format!("RULE:{text}: {e}"))?;
    let replacement = rust_replacement(replacement, compiled.captures_len() - 1);
    Ok((
        Rule::Replace {
            pattern: compiled,
            replacement,
            case,
        },
        after,
    ))
}

/// The text up to the first `/` not escaped by a `\` (escapes kept, as
/// Kafka keeps them for the pattern), and what follows that `/`.
fn up_to_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

/// A Java replacement (`$n`, with `\` escaping the next character) in
/// the `regex` crate's syntax. Java reads as many digits after `$` as
/// make a group the pattern has (`$0` being the whole match); Kafka first
/// turns a `$n` past the groups into a literal `$n`, as here.
fn rust_replacement(java: &str, groups: usize) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(next) => out.push(next),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                // `$0` is the whole match; otherwise the longest leading
                // digits naming a group. The rest are literal digits.
                let taken = if digits.starts_with('0') {
                    Some(1)
                } else {
                    (1..=digits.len())
                        .rev()
                        .find(|&n| digits[..n].parse::<usize>().is_ok_and(|g| g <= groups))
                };
                match taken {
                    Some(n) => {
                        out.push_str(&format!("${{{}}}", &digits[..n]));
                        out.push_str(&digits[n..]);
                    }
                    None => {
                        out.push_str("$$");
                        out.push_str(&digits);
                    }
                }
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> PrincipalRules {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_default_gives_the_subject_whole() {
        let dn = "CN=alice,OU=eng,O=Acme";
        assert_eq!(PrincipalRules::default().name(dn).unwrap(), dn);
        assert_eq!(rules(" DEFAULT ").name(dn).unwrap(), dn);
    }

    #[test]
    fn the_first_rule_that_matches_the_whole_subject_names_it() {
        let r = rules(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=([^,]*),OU=(.*?),.*$/$1@$2/U,DEFAULT",
        );
        assert_eq!(
            r.name("CN=kafka-connect,OU=ServiceUsers,O=Acme").unwrap(),
            "kafka-connect"
        );
        assert_eq!(r.name("CN=alice,OU=eng,O=Acme").unwrap(), "ALICE@ENG");
        assert_eq!(r.name("CN=bob").unwrap(), "CN=bob");
        // A match of a part only does not apply.
        let part = rules("RULE:CN=([a-z]+)/$1/L");
        assert_eq!(part.name("CN=Bob").as_deref(), None);
        assert_eq!(part.name("CN=bob").as_deref(), Some("bob"));
    }

    #[test]
    fn replacements_read_groups_dollars_and_escapes_as_java_does() {
        // $12 with one group: group 1 and a literal 2; $3 past the groups
        // stays literal; \$ and \/ are literal too; $0 is the whole.
        let r = rules(r"RULE:^CN=(\w+)$/$12-$3-\$x-a\/b-$0/");
        assert_eq!(r.name("CN=svc").unwrap(), "svc2-$3-$x-a/b-CN=svc");
        let whole = rules("RULE:^.*,O=Acme$/$0/");
        assert_eq!(whole.name("CN=a,O=Acme").unwrap(), "CN=a,O=Acme");
    }

    #[test]
    fn what_is_not_a_rule_is_refused_with_why() {
        for (text, needle) in [
            ("", "no rule given"),
            ("SOMETIMES", "not a rule"),
            ("DEFAULT, RULE:^CN=(.*)$", "RULE:pattern/replacement/"),
            ("RULE:^CN=(?=a)/$1/", "look-around"),
            ("DEFAULTS", "not a rule"),
        ] {
            let e = text.parse::<PrincipalRules>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
        // Empty rules between commas are skipped.
        assert_eq!(rules("DEFAULT,,").name("CN=x").unwrap(), "CN=x");
    }
}
