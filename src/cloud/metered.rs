//! A [`NodeGroups`] decorator that counts and times every cloud call:
//! `rota_cloud_calls_total{provider, call, outcome}` and
//! `rota_cloud_call_duration_seconds{provider, call}`. It wraps whatever provider the process
//! uses (the simulated cloud, the HTTP client, a real cloud's driver), so every provider is
//! measured the same way and none has to know about metrics. The provider label is the
//! group's cloud (`aws`, `gcp`, `azure`); the call is the trait method: a fixed, tiny set.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{CloudError, CloudErrorKind, GroupRef, GroupState, NodeGroups};
use crate::metrics::{Metrics, Outcome};

/// Counts and times the calls of `inner`.
pub struct MeteredNodeGroups {
    inner: Arc<dyn NodeGroups>,
    metrics: Metrics,
}

impl MeteredNodeGroups {
    pub fn new(inner: Arc<dyn NodeGroups>, metrics: Metrics) -> Self {
        MeteredNodeGroups { inner, metrics }
    }

    fn record<T>(
        &self,
        group: &GroupRef,
        call: &str,
        started: Instant,
        result: &Result<T, CloudError>,
    ) {
        self.record_for(group.cloud(), call, started, result);
    }

    /// A call of `cloud`'s provider (an image query has no group).
    fn record_for<T>(
        &self,
        cloud: rota_core::cloud::Cloud,
        call: &str,
        started: Instant,
        result: &Result<T, CloudError>,
    ) {
        let provider = cloud.to_string();
        self.metrics
            .record_cloud_call(&provider, call, outcome(result));
        self.metrics
            .observe_cloud_call(&provider, call, started.elapsed().as_secs_f64());
    }
}

/// The `outcome` label of a call's result.
pub fn outcome<T>(result: &Result<T, CloudError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(e) => match e.kind {
            CloudErrorKind::Throttled => Outcome::Throttled,
            CloudErrorKind::NotFound => Outcome::NotFound,
            _ => Outcome::Error,
        },
    }
}

#[async_trait]
impl NodeGroups for MeteredNodeGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let t = Instant::now();
        let r = self.inner.describe(group).await;
        self.record(group, "describe", t, &r);
        r
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: rota_core::cloud::Arch,
    ) -> Result<rota_core::cloud::ImageCheck, CloudError> {
        let t = Instant::now();
        let r = self.inner.check_image(group, image, arch).await;
        self.record(group, "check_image", t, &r);
        r
    }

    async fn find_image(
        &self,
        query: &rota_core::cloud::ImageQuery,
    ) -> Result<rota_core::cloud::FoundImage, CloudError> {
        let t = Instant::now();
        let r = self.inner.find_image(query).await;
        self.record_for(query.cloud(), "find_image", t, &r);
        r
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        let t = Instant::now();
        let r = self.inner.set_image(group, image).await;
        self.record(group, "set_image", t, &r);
        r
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        let t = Instant::now();
        let r = self.inner.set_capacity(group, desired, max).await;
        self.record(group, "set_capacity", t, &r);
        r
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        let t = Instant::now();
        let r = self.inner.set_max(group, max).await;
        self.record(group, "set_max", t, &r);
        r
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        let t = Instant::now();
        let r = self.inner.terminate(group, instance_id, decrement).await;
        self.record(group, "terminate", t, &r);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers describe with `Throttled` once, then succeeds; the rest always succeeds.
    struct Flaky(Mutex<u32>);

    #[async_trait]
    impl NodeGroups for Flaky {
        async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            if *n == 1 {
                return Err(CloudError::new(
                    CloudErrorKind::Throttled,
                    "DescribeAutoScalingGroups",
                    group,
                    "Rate exceeded",
                ));
            }
            Ok(GroupState {
                group: group.clone(),
                desired: 1,
                min: 0,
                max: 2,
                template_image: "ami-1".into(),
                instances: vec![],
            })
        }
        async fn check_image(
            &self,
            _: &GroupRef,
            _: &str,
            _: rota_core::cloud::Arch,
        ) -> Result<rota_core::cloud::ImageCheck, CloudError> {
            Ok(rota_core::cloud::ImageCheck::Usable)
        }
        async fn set_image(&self, _: &GroupRef, _: &str) -> Result<(), CloudError> {
            Ok(())
        }
        async fn set_max(&self, _: &GroupRef, _: u32) -> Result<(), CloudError> {
            Ok(())
        }
        async fn set_capacity(
            &self,
            _: &GroupRef,
            _: u32,
            _: Option<u32>,
        ) -> Result<(), CloudError> {
            Ok(())
        }
        async fn terminate(&self, _: &GroupRef, _: &str, _: bool) -> Result<(), CloudError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn every_call_is_counted_by_provider_call_and_outcome_and_timed() {
        let metrics = Metrics::new();
        let g = MeteredNodeGroups::new(Arc::new(Flaky(Mutex::new(0))), metrics.clone());
        let group = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        };
        assert!(g.describe(&group).await.is_err());
        g.describe(&group).await.unwrap();
        g.set_capacity(&group, 2, Some(3)).await.unwrap();
        let text = metrics.render();
        for line in [
            r#"rota_cloud_calls_total{call="describe",cluster="",outcome="throttled",provider="aws"} 1"#,
            r#"rota_cloud_calls_total{call="describe",cluster="",outcome="ok",provider="aws"} 1"#,
            r#"rota_cloud_calls_total{call="set_capacity",cluster="",outcome="ok",provider="aws"} 1"#,
            r#"rota_cloud_call_duration_seconds_count{call="describe",cluster="",provider="aws"} 2"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}
