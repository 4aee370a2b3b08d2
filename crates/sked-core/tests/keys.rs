//! The key service: who may create, list and revoke which keys, and what authenticates.

use sked_core::CoreError;
use sked_core::auth::{Principal, Role};
use sked_core::ids::TenantId;
use sked_core::ports::KeyStore;
use sked_core::service::keys::{Keys, NewKey};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::MemKeys;
use std::sync::Arc;

fn setup() -> (Keys, Arc<MemKeys>) {
    let store = Arc::new(MemKeys::new());
    let clock = Arc::new(ManualClock::new(sked_testkit::contract::t0()));
    (Keys::new(store.clone(), clock), store)
}

fn new(tenant: &str, role: Role) -> NewKey {
    NewKey {
        tenant: TenantId::from(tenant),
        role,
        name: format!("{role} key of {tenant}"),
    }
}

#[tokio::test]
async fn the_first_start_makes_one_operator_key_and_it_authenticates() {
    let (keys, store) = setup();
    let first = keys
        .bootstrap(&TenantId::default())
        .await
        .unwrap()
        .expect("a first key");
    assert_eq!(first.key.role, Role::Operator);
    assert!(
        keys.bootstrap(&TenantId::default()).await.unwrap().is_none(),
        "only once"
    );
    let who = keys.authenticate(&first.secret).await.unwrap();
    assert_eq!((who.tenant, who.role), (TenantId::default(), Role::Operator));
    // The store holds the hash, never the secret.
    let listed = store.list_keys(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(!format!("{listed:?}").contains(&first.secret));
}

#[tokio::test]
async fn unknown_malformed_and_revoked_keys_authenticate_nothing() {
    let (keys, _) = setup();
    let op = keys.bootstrap(&TenantId::default()).await.unwrap().unwrap();
    let operator = keys.authenticate(&op.secret).await.unwrap();
    let made = keys.create(&operator, new("acme", Role::Write)).await.unwrap();
    assert!(keys.authenticate(&made.secret).await.is_ok());
    keys.revoke(&operator, &made.key.id).await.unwrap();
    for secret in [made.secret.as_str(), "sked_0000", "", "Bearer x", &made.secret[..20]] {
        assert!(
            matches!(keys.authenticate(secret).await, Err(CoreError::Unauthenticated(_))),
            "{secret:?} authenticated"
        );
    }
}

#[tokio::test]
async fn an_admin_manages_its_own_tenants_keys_and_sees_no_others() {
    let (keys, _) = setup();
    let op = keys.bootstrap(&TenantId::default()).await.unwrap().unwrap();
    let operator = keys.authenticate(&op.secret).await.unwrap();
    let acme_admin = keys.create(&operator, new("acme", Role::Admin)).await.unwrap();
    let beta_key = keys.create(&operator, new("beta", Role::Write)).await.unwrap();
    let admin = keys.authenticate(&acme_admin.secret).await.unwrap();

    let own = keys.create(&admin, new("acme", Role::Read)).await.unwrap();
    assert!(matches!(
        keys.create(&admin, new("beta", Role::Read)).await,
        Err(CoreError::PermissionDenied(_))
    ));
    assert!(matches!(
        keys.create(&admin, new("acme", Role::Operator)).await,
        Err(CoreError::PermissionDenied(_))
    ));
    let mut seen: Vec<String> = keys.list(&admin).await.unwrap().into_iter().map(|k| k.id).collect();
    let mut expected = vec![acme_admin.key.id.clone(), own.key.id.clone()];
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    // Another tenant's key is absent to an admin; the operator revokes anyone's.
    assert!(matches!(
        keys.revoke(&admin, &beta_key.key.id).await,
        Err(CoreError::NotFound(_))
    ));
    keys.revoke(&operator, &beta_key.key.id).await.unwrap();
    assert_eq!(keys.list(&operator).await.unwrap().len(), 4);
}

#[tokio::test]
async fn read_and_write_keys_manage_no_keys_and_bad_fields_are_named() {
    let (keys, _) = setup();
    for role in [Role::Read, Role::Write] {
        let caller = Principal::new(TenantId::from("acme"), role);
        assert!(matches!(
            keys.create(&caller, new("acme", Role::Read)).await,
            Err(CoreError::PermissionDenied(_))
        ));
        assert!(matches!(keys.list(&caller).await, Err(CoreError::PermissionDenied(_))));
    }
    let operator = Principal::new(TenantId::default(), Role::Operator);
    let bad_tenant = keys.create(&operator, new("bad tenant!", Role::Read)).await;
    assert!(
        matches!(bad_tenant, Err(CoreError::Invalid(ref e)) if e[0].field == "tenant"),
        "{bad_tenant:?}"
    );
    let mut empty = new("acme", Role::Read);
    empty.name = "  ".into();
    assert!(matches!(keys.create(&operator, empty).await, Err(CoreError::Invalid(ref e)) if e[0].field == "name"));
}

/// A live key is read from the store once per `KEY_CHECK_TTL`, not on every request; a key
/// revoked by another process on the same store (here: in the store directly) is refused once
/// that time has passed, and one revoked through this service at once (the case above).
#[tokio::test]
async fn a_key_revoked_elsewhere_is_refused_within_the_check_ttl() {
    use sked_core::service::keys::KEY_CHECK_TTL;
    let store = Arc::new(MemKeys::new());
    let clock = Arc::new(ManualClock::new(sked_testkit::contract::t0()));
    let keys = Keys::new(store.clone(), clock.clone());
    let op = keys.bootstrap(&TenantId::default()).await.unwrap().unwrap();
    let operator = keys.authenticate(&op.secret).await.unwrap();
    let made = keys.create(&operator, new("acme", Role::Write)).await.unwrap();
    assert!(keys.authenticate(&made.secret).await.is_ok());

    store.revoke_key(&made.key.id, clock.now()).await.unwrap();
    assert!(
        keys.authenticate(&made.secret).await.is_ok(),
        "within the TTL the key is not read again"
    );
    clock.advance(KEY_CHECK_TTL);
    assert!(
        matches!(
            keys.authenticate(&made.secret).await,
            Err(CoreError::Unauthenticated(_))
        ),
        "read again after the TTL: revoked"
    );
    assert!(
        keys.authenticate(&op.secret).await.is_ok(),
        "other keys still authenticate"
    );
}

/// A deployment's own operator key (`SKED_OPERATOR_KEY`): stored once whichever server adopts
/// it first, then authenticates; adopted again it is known; revoked it stays revoked; a
/// malformed one is refused naming the variable, and nothing is stored.
#[tokio::test]
async fn an_operator_key_from_the_deployment_is_adopted_once_and_never_revived() {
    use sked_core::service::keys::Adopted;
    let (keys, store) = setup();
    let secret = format!("sked_{}", "0123456789abcdef".repeat(3));
    let tenant = TenantId::default();

    let Adopted::Stored(id) = keys.adopt_operator_key(&tenant, &secret).await.unwrap() else {
        panic!("stored on first adoption")
    };
    assert_eq!(
        keys.adopt_operator_key(&tenant, &secret).await.unwrap(),
        Adopted::Known(id.clone())
    );
    assert!(
        keys.bootstrap(&tenant).await.unwrap().is_none(),
        "no first key beside it"
    );
    let who = keys.authenticate(&secret).await.unwrap();
    assert_eq!((&who.tenant, who.role), (&tenant, Role::Operator));

    keys.revoke(&who, &id).await.unwrap();
    assert_eq!(
        keys.adopt_operator_key(&tenant, &secret).await.unwrap(),
        Adopted::Revoked(id)
    );
    assert!(keys.authenticate(&secret).await.is_err(), "a revoked key stays revoked");

    for bad in [
        "",
        "sked_short",
        &secret.to_uppercase(),
        &format!("{secret}0"),
        "x".repeat(53).as_str(),
    ] {
        let err = keys.adopt_operator_key(&tenant, bad).await.unwrap_err();
        assert!(
            matches!(&err, CoreError::Invalid(e) if e[0].field == "SKED_OPERATOR_KEY"),
            "{bad:?}: {err:?}"
        );
    }
    assert_eq!(store.list_keys(None).await.unwrap().len(), 1);
}
