//! Who is calling in IAM mode (`AuthMode: IAM`): API Gateway verified the request's SigV4
//! signature and names the signer by ARN, and the operator keeps a mapping from IAM roles and
//! users to a tenant and a role ([`IamPrincipals`], the template's `IamPrincipals`, the
//! function's `SKED_IAM_PRINCIPALS`). This module parses that mapping and looks callers up in
//! it; it reads no request and no environment ([`crate::identity`] does the one, the main the
//! other).
//!
//! The mapping is `<principal>=<tenant>:<role>` entries separated by commas (whitespace around
//! an entry is ignored; an empty value maps no one), where `<principal>` is
//!
//! - an IAM role, `arn:aws:iam::<account>:role/<name>` (a path allowed: `role/<path>/<name>`):
//!   it maps every session of the role, `arn:aws:sts::<account>:assumed-role/<name>/<session>`.
//!   A session matches by partition, account and role name only: the session ARN carries no
//!   path (role names are unique in an account whatever their path), and the session name is
//!   the caller's choice, so it never matters.
//! - an IAM user, `arn:aws:iam::<account>:user/<name>` (or `user/<path>/<name>`): it maps the
//!   caller whose ARN is exactly that.
//!
//! Other partitions (`arn:aws-cn:…`, `arn:aws-us-gov:…`) are accepted and must match too. The
//! role is `read`, `write`, `admin` or `operator`; the tenant an id (`[A-Za-z0-9_.-]{1,128}`).
//! Names compare exactly, case included. Anything else — no `=`, not a role or user ARN (a
//! session ARN, the root user, a wildcard), an unknown role, a bad tenant, a principal mapped
//! twice — is an error naming the entry: deny by default, the function does not start with a
//! mapping it cannot read. A name containing a comma cannot be mapped (the comma splits it).

use sked_core::auth::{Principal, Role};
use sked_core::ids::{TenantId, is_valid_id};
use std::collections::HashMap;
use std::fmt;

/// The operator's mapping from IAM principals to the tenant and role they act as. The default
/// maps no one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IamPrincipals {
    /// Who each mapped principal is.
    map: HashMap<Iam, Principal>,
}

/// What a configured principal and a caller's ARN both reduce to, so that a lookup is one
/// comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Iam {
    /// An IAM role, matched by its sessions.
    Role {
        /// `aws`, `aws-cn`, …
        partition: String,
        /// The 12-digit account id.
        account: String,
        /// The role's name (the last segment of its ARN; no path).
        name: String,
    },
    /// An IAM user, by its exact ARN.
    User(String),
}

impl IamPrincipals {
    /// The principal the caller with ARN `user_arn` (API Gateway's `userArn`: an IAM user or an
    /// assumed-role session) is mapped to, if any.
    pub fn principal_of(&self, user_arn: &str) -> Option<&Principal> {
        self.map.get(&caller(user_arn)?)
    }

    /// How many principals are mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no one is mapped (every IAM caller is refused).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Why the mapping could not be read: the entry, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamPrincipalsError {
    /// The entry as written (trimmed).
    pub entry: String,
    /// What is wrong with it.
    pub problem: IamEntryProblem,
}

/// What is wrong with an entry of the mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IamEntryProblem {
    /// Nothing between two commas, or before or after one.
    Empty,
    /// No `=` between the principal and `<tenant>:<role>`.
    MissingEquals,
    /// The principal is not an IAM role or user ARN; why.
    Principal(&'static str),
    /// No `:` between the tenant and the role.
    MissingColon,
    /// The tenant is not an id.
    Tenant,
    /// The role is not one (`Role`'s own message).
    Role(String),
    /// The principal (or, for a role, another ARN of the same role) was mapped by an earlier
    /// entry.
    Duplicate,
}

impl fmt::Display for IamPrincipalsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {:?}: ", self.entry)?;
        match &self.problem {
            IamEntryProblem::Empty => f.write_str("empty (two commas in a row, or one at an end)"),
            IamEntryProblem::MissingEquals => f.write_str("not <principal>=<tenant>:<role> (no '=')"),
            IamEntryProblem::Principal(why) => write!(
                f,
                "the principal is not arn:aws:iam::<account>:role/<name> or arn:aws:iam::<account>:user/<name>: {why}"
            ),
            IamEntryProblem::MissingColon => f.write_str("not <principal>=<tenant>:<role> (no ':' after '=')"),
            IamEntryProblem::Tenant => f.write_str("the tenant is not an id ([A-Za-z0-9_.-]{1,128})"),
            IamEntryProblem::Role(why) => f.write_str(why),
            IamEntryProblem::Duplicate => f.write_str("this principal is mapped by an earlier entry already"),
        }
    }
}

impl std::error::Error for IamPrincipalsError {}

/// The mapping `text` (the value of `SKED_IAM_PRINCIPALS`) describes; see the module's header
/// for the format.
pub fn parse_iam_principals(text: &str) -> Result<IamPrincipals, IamPrincipalsError> {
    let mut map = HashMap::new();
    if text.trim().is_empty() {
        return Ok(IamPrincipals { map });
    }
    for entry in text.split(',').map(str::trim) {
        let fail = |problem| IamPrincipalsError {
            entry: entry.to_string(),
            problem,
        };
        if entry.is_empty() {
            return Err(fail(IamEntryProblem::Empty));
        }
        // The last '=': a role or user name may hold one, a tenant or role may not.
        let (arn, who) = entry
            .rsplit_once('=')
            .ok_or_else(|| fail(IamEntryProblem::MissingEquals))?;
        let principal = configured(arn).map_err(|why| fail(IamEntryProblem::Principal(why)))?;
        let (tenant, role) = who.split_once(':').ok_or_else(|| fail(IamEntryProblem::MissingColon))?;
        if !is_valid_id(tenant) {
            return Err(fail(IamEntryProblem::Tenant));
        }
        let role: Role = role.parse().map_err(|why| fail(IamEntryProblem::Role(why)))?;
        if map
            .insert(principal, Principal::new(TenantId::from(tenant), role))
            .is_some()
        {
            return Err(fail(IamEntryProblem::Duplicate));
        }
    }
    Ok(IamPrincipals { map })
}

/// The parts of `arn:<partition>:<service>::<account>:<resource>` (no region: IAM and STS are
/// global).
struct Arn<'a> {
    partition: &'a str,
    service: &'a str,
    account: &'a str,
    resource: &'a str,
}

fn split_arn(arn: &str) -> Option<Arn<'_>> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some(service), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let partition_ok = partition.starts_with("aws")
        && partition
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (partition_ok && account_ok).then_some(Arn {
        partition,
        service,
        account,
        resource,
    })
}

/// Whether `name` is an IAM role or user name: `[A-Za-z0-9+=,.@_-]{1,64}`.
fn is_iam_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
}

/// Whether `segment` is a segment of an IAM path: printable ASCII but '/'.
fn is_path_segment(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

/// A principal as the operator writes it, or why it is not one.
fn configured(arn: &str) -> Result<Iam, &'static str> {
    let parts = split_arn(arn).ok_or("not arn:<partition>:iam::<12-digit account>:…")?;
    if parts.service == "sts" {
        return Err("a session ARN; map the role's ARN, arn:aws:iam::<account>:role/<name>");
    }
    if parts.service != "iam" {
        return Err("not an IAM ARN");
    }
    let (kind, path_and_name) = parts
        .resource
        .split_once('/')
        .ok_or("neither role/<name> nor user/<name> (the root user cannot be mapped)")?;
    let mut segments: Vec<&str> = path_and_name.split('/').collect();
    let name = segments.pop().unwrap_or_default();
    if !is_iam_name(name) {
        return Err("the name is not [A-Za-z0-9+=,.@_-]{1,64} (no wildcards)");
    }
    if !segments.into_iter().all(is_path_segment) {
        return Err("an empty or invalid path segment");
    }
    match kind {
        "role" => Ok(Iam::Role {
            partition: parts.partition.into(),
            account: parts.account.into(),
            name: name.into(),
        }),
        "user" => Ok(Iam::User(arn.into())),
        _ => Err("neither role/<name> nor user/<name>"),
    }
}

/// A caller as API Gateway names it: an assumed-role session or an IAM user. `None` for
/// anything else (the root user, a federated user, …), which no entry maps.
fn caller(user_arn: &str) -> Option<Iam> {
    let parts = split_arn(user_arn)?;
    match (parts.service, parts.resource.split_once('/')?) {
        ("sts", ("assumed-role", role_and_session)) => {
            let (name, session) = role_and_session.split_once('/')?;
            (!name.is_empty() && !session.is_empty() && !session.contains('/')).then(|| Iam::Role {
                partition: parts.partition.into(),
                account: parts.account.into(),
                name: name.into(),
            })
        }
        ("iam", ("user", _)) => Some(Iam::User(user_arn.into())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPPING: &str = "arn:aws:iam::123456789012:role/ci/sked-deploy=acme:write, \
        arn:aws:iam::123456789012:role/sked-audit=acme:read,\
        arn:aws:iam::123456789012:user/ops/alice=beta:operator";

    fn who(mapping: &IamPrincipals, arn: &str) -> Option<(String, Role)> {
        mapping.principal_of(arn).map(|p| (p.tenant.to_string(), p.role))
    }

    fn problem(text: &str) -> (String, IamEntryProblem) {
        let err = parse_iam_principals(text).expect_err(text);
        (err.entry, err.problem)
    }

    #[test]
    fn a_good_list_maps_each_role_session_and_user() {
        let mapping = parse_iam_principals(MAPPING).unwrap();
        assert_eq!(mapping.len(), 3);
        // Any session of the role, whatever the caller named it; the role's path is not in it.
        for session in ["deploy-42", "x", "acme@example.com"] {
            let arn = format!("arn:aws:sts::123456789012:assumed-role/sked-deploy/{session}");
            assert_eq!(who(&mapping, &arn), Some(("acme".into(), Role::Write)), "{arn}");
        }
        assert_eq!(
            who(&mapping, "arn:aws:sts::123456789012:assumed-role/sked-audit/s"),
            Some(("acme".into(), Role::Read))
        );
        assert_eq!(
            who(&mapping, "arn:aws:iam::123456789012:user/ops/alice"),
            Some(("beta".into(), Role::Operator))
        );
    }

    #[test]
    fn only_the_same_account_role_name_or_exact_user_arn_matches() {
        let mapping = parse_iam_principals(MAPPING).unwrap();
        for stranger in [
            "arn:aws:sts::210987654321:assumed-role/sked-deploy/s", // another account
            "arn:aws-cn:sts::123456789012:assumed-role/sked-deploy/s", // another partition
            "arn:aws:sts::123456789012:assumed-role/sked-deploy-2/s", // a longer name
            "arn:aws:sts::123456789012:assumed-role/SKED-DEPLOY/s", // names compare exactly
            "arn:aws:sts::123456789012:assumed-role/sked-deploy/",  // no session
            "arn:aws:sts::123456789012:assumed-role/ci/sked-deploy/s", // not a session ARN
            "arn:aws:iam::123456789012:role/ci/sked-deploy",        // a role is not a caller
            "arn:aws:iam::123456789012:user/alice",                 // the user without its path
            "arn:aws:iam::210987654321:user/ops/alice",             // another account's alice
            "arn:aws:sts::123456789012:assumed-role/alice/s",       // a role named like the user
            "arn:aws:sts::123456789012:federated-user/alice",
            "arn:aws:iam::123456789012:root",
            "",
            "sked-deploy",
        ] {
            assert_eq!(who(&mapping, stranger), None, "{stranger}");
        }
    }

    #[test]
    fn an_empty_list_maps_no_one() {
        for text in ["", "  "] {
            let mapping = parse_iam_principals(text).unwrap();
            assert!(mapping.is_empty());
            assert_eq!(
                who(&mapping, "arn:aws:sts::123456789012:assumed-role/sked-deploy/s"),
                None
            );
        }
    }

    #[test]
    fn a_bad_role_or_tenant_is_an_error_naming_the_entry() {
        let (entry, why) =
            problem("arn:aws:iam::123456789012:role/a=acme:write,arn:aws:iam::123456789012:role/b=acme:root");
        assert_eq!(entry, "arn:aws:iam::123456789012:role/b=acme:root");
        assert!(
            matches!(&why, IamEntryProblem::Role(m) if m.contains("\"root\"")),
            "{why:?}"
        );
        assert_eq!(
            problem("arn:aws:iam::123456789012:role/a=bad tenant:read"),
            (
                "arn:aws:iam::123456789012:role/a=bad tenant:read".into(),
                IamEntryProblem::Tenant
            )
        );
        assert_eq!(
            problem("arn:aws:iam::123456789012:role/a=acme").1,
            IamEntryProblem::MissingColon
        );
    }

    #[test]
    fn an_entry_without_equals_is_an_error() {
        assert_eq!(
            problem("arn:aws:iam::123456789012:role/a:acme:read"),
            (
                "arn:aws:iam::123456789012:role/a:acme:read".into(),
                IamEntryProblem::MissingEquals
            )
        );
    }

    #[test]
    fn a_principal_that_is_not_a_role_or_user_arn_is_an_error() {
        for arn in [
            "sked-deploy",
            "arn:aws:iam::1234:role/a",                             // not a 12-digit account
            "arn:aws:iam:us-east-1:123456789012:role/a",            // a region
            "arn:aws:sts::123456789012:assumed-role/sked-deploy/s", // a session, not the role
            "arn:aws:iam::123456789012:root",
            "arn:aws:iam::123456789012:role/*",
            "arn:aws:iam::123456789012:role/",
            "arn:aws:iam::123456789012:role//a",
            "arn:aws:iam::123456789012:group/a",
            "arn:aws:s3::123456789012:role/a",
            "arn:other:iam::123456789012:role/a",
        ] {
            let (entry, why) = problem(&format!("{arn}=acme:read"));
            assert_eq!(entry, format!("{arn}=acme:read"));
            assert!(matches!(why, IamEntryProblem::Principal(_)), "{arn}: {why:?}");
        }
    }

    #[test]
    fn a_principal_mapped_twice_or_an_empty_entry_is_an_error() {
        // The same role under another path is the same role.
        let twice = "arn:aws:iam::123456789012:role/a=acme:read,arn:aws:iam::123456789012:role/p/a=beta:read";
        assert_eq!(problem(twice).1, IamEntryProblem::Duplicate);
        assert_eq!(
            problem("arn:aws:iam::123456789012:role/a=acme:read,,").1,
            IamEntryProblem::Empty
        );
    }

    #[test]
    fn an_error_says_which_entry_and_why() {
        let err = parse_iam_principals("arn:aws:iam::123456789012:role/a=acme:root").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("entry \"arn:aws:iam::123456789012:role/a=acme:root\": "),
            "{text}"
        );
        assert!(text.contains("read, write, admin, operator"), "{text}");
    }
}
