//! `template.yaml`'s two fronts of the API function stay deny-by-default: behind the HTTP API
//! (`ApiFront: HttpApi`) every route but the health check and the dashboard's files needs the
//! authorizer, and the function's own URL (`ApiFront: FunctionUrl`) exists only with that
//! front, always with `AuthType: AWS_IAM`, and only with `AuthMode: IAM` (a function URL checks
//! SigV4 signatures, never JWTs). Read offline with serde_yaml; `cfn-lint` and `sam validate`
//! (`make lint-template`) check the rest of the syntax.

use serde_yaml::Value;
use sked_aws::testing::repo_root;

fn template() -> Value {
    let path = repo_root().join("template.yaml");
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_yaml::from_str(&body).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The argument of `!<tag>` (or `Fn::<tag>:` / `Ref:`), if `v` is that intrinsic.
fn tagged<'a>(v: &'a Value, tag: &str) -> Option<&'a Value> {
    match v {
        Value::Tagged(t) if t.tag == tag => Some(&t.value),
        Value::Mapping(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next()?;
            let key = k.as_str()?;
            (key == tag || key.strip_prefix("Fn::") == Some(tag)).then_some(arg)
        }
        _ => None,
    }
}

/// `(parameter, value)` of `!Equals [!Ref parameter, value]`.
fn equals_ref(v: &Value) -> Option<(String, String)> {
    let pair = tagged(v, "Equals")?.as_sequence()?;
    let [reference, value] = pair.as_slice() else {
        return None;
    };
    let parameter = tagged(reference, "Ref")?.as_str()?;
    Some((parameter.to_string(), value.as_str()?.to_string()))
}

fn resources(template: &Value) -> Vec<(String, &Value)> {
    let map = template["Resources"].as_mapping().expect("Resources");
    map.iter()
        .map(|(id, r)| (id.as_str().expect("logical id").to_string(), r))
        .collect()
}

#[test]
fn the_function_url_is_iam_only_and_exists_only_as_the_chosen_front() {
    let template = template();
    let urls: Vec<_> = resources(&template)
        .into_iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::Lambda::Url"))
        .collect();
    let [(id, url)] = urls.as_slice() else {
        panic!("expected one AWS::Lambda::Url, found {urls:?}")
    };
    assert_eq!(url["Condition"].as_str(), Some("UseFunctionUrl"), "{id}");
    assert_eq!(
        url["Properties"]["AuthType"].as_str(),
        Some("AWS_IAM"),
        "{id}: never NONE"
    );
    let target = tagged(&url["Properties"]["TargetFunctionArn"], "GetAtt").and_then(Value::as_str);
    assert_eq!(target, Some("ApiFunction.Arn"), "{id}");
    assert_eq!(
        equals_ref(&template["Conditions"]["UseFunctionUrl"]),
        Some(("ApiFront".into(), "FunctionUrl".into()))
    );

    let rule = &template["Rules"]["FunctionUrlNeedsIam"];
    assert_eq!(
        equals_ref(&rule["RuleCondition"]),
        Some(("ApiFront".into(), "FunctionUrl".into()))
    );
    let asserted: Vec<_> = rule["Assertions"]
        .as_sequence()
        .expect("Assertions")
        .iter()
        .filter_map(|a| equals_ref(&a["Assert"]))
        .collect();
    assert_eq!(asserted, [("AuthMode".to_string(), "IAM".to_string())]);
}

#[test]
fn the_http_api_exists_only_as_the_chosen_front_and_opens_only_health_and_dashboard_files() {
    let template = template();
    let http_api_only = ["UseHttpApi", "HttpApiWithJwt"];
    let mut routes = 0;
    for (id, r) in resources(&template) {
        let ty = r["Type"].as_str().unwrap_or_default();
        let fronts_it = ty.starts_with("AWS::ApiGatewayV2::")
            || (ty == "AWS::Lambda::Permission"
                && r["Properties"]["Principal"].as_str() == Some("apigateway.amazonaws.com"));
        if !fronts_it {
            continue;
        }
        let condition = r["Condition"].as_str().unwrap_or_default();
        assert!(
            http_api_only.contains(&condition),
            "{id} ({ty}) has condition {condition:?}"
        );
        if ty != "AWS::ApiGatewayV2::Route" {
            continue;
        }
        routes += 1;
        let key = r["Properties"]["RouteKey"].as_str().expect("RouteKey");
        if r["Properties"]["AuthorizationType"].as_str() == Some("NONE") {
            assert!(
                ["GET /healthz", "GET /", "GET /ui/{proxy+}"].contains(&key),
                "{id}: {key} is open"
            );
        }
    }
    assert!(routes >= 2, "the HTTP API's routes were found");
}
