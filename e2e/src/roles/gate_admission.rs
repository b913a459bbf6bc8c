//! Gate mode's admission policy (`deploy/gate/admission-policy.yaml`), played by the driver
//! on the pods a gate-mode scenario creates, so the suite runs the same whether the policy is
//! installed on the cluster or not: the rule is `caldera_cache::gate::admit`, which adds the
//! gate only where it is missing (and a cluster with the policy finds it present).

use serde_json::Value;

/// Adds the gate `scheduling.caldera.sh/gang` to a pod manifest that names a group and is
/// scheduled by `default-scheduler`, unless it carries it already. A manifest that does not
/// read as a Pod is left as it is (the server will say what is wrong with it).
pub fn admit(manifest: &mut Value) {
    let Ok(mut pod) = serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(manifest.clone())
    else {
        return;
    };
    if !caldera_cache::gate::admit(&mut pod) {
        return;
    }
    let gates = pod.spec.and_then(|s| s.scheduling_gates);
    if let (Some(spec), Ok(gates)) = (
        manifest.get_mut("spec").and_then(Value::as_object_mut),
        serde_json::to_value(gates),
    ) {
        spec.insert("schedulingGates".into(), gates);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grouped_default_scheduler_pods_get_the_gate_once() {
        let mut pod = json!({"metadata": {"name": "p", "labels": {"scheduling.volcano.sh/podgroup": "g"}},
            "spec": {"containers": [{"name": "c"}]}});
        admit(&mut pod);
        assert_eq!(
            pod["spec"]["schedulingGates"],
            json!([{"name": caldera_api::GANG_GATE}])
        );
        admit(&mut pod);
        assert_eq!(
            pod["spec"]["schedulingGates"].as_array().map(Vec::len),
            Some(1)
        );
        let mut other = json!({"metadata": {"name": "q", "labels": {"scheduling.volcano.sh/podgroup": "g"}},
            "spec": {"schedulerName": "caldera", "containers": [{"name": "c"}]}});
        admit(&mut other);
        assert!(other["spec"]["schedulingGates"].is_null());
        let mut lone = json!({"metadata": {"name": "r"}, "spec": {"containers": [{"name": "c"}]}});
        admit(&mut lone);
        assert!(lone["spec"]["schedulingGates"].is_null());
    }
}
