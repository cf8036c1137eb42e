"""moto_server for rota's AWS tests, with the two launch-template behaviours EC2 documents and
moto 5.2 leaves out, and a record of every CreateLaunchTemplateVersion.

- `CreateLaunchTemplateVersion` with `SourceVersion`: EC2 bases the new version on that
  version, the `LaunchTemplateData` given replacing only the fields it names. moto ignores
  `SourceVersion` (the new version holds only what the request names), so "the new version
  copies everything but the AMI" could never fail a test. Here the new version is the source
  version's data with the request's fields laid over it, as EC2 does.
- `DescribeLaunchTemplateVersions` with `ResolveAlias`: EC2 answers an `ImageId` of
  `resolve:ssm:NAME` with the AMI the SSM parameter holds. moto ignores the flag. Here it
  is resolved from moto's own SSM parameters.

Every CreateLaunchTemplateVersion is appended as one JSON line to the file named by
`ROTA_MOTO_RECORD` (source version, the fields the request named, the data before and
after), which tests/support/moto.rs holds to the contract: a version rota makes names its
source version by number and changes the image only.

Usage, as moto_server: `python moto_server.py -H 127.0.0.1 -p PORT`.
"""

import copy
import json
import os

from moto.ec2.responses.launch_templates import LaunchTemplates
from moto.server import main

RECORD = os.environ.get("ROTA_MOTO_RECORD")


def _record(entry):
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(json.dumps(entry, default=str) + "\n")


def _template(response):
    template_id = response._get_param("LaunchTemplateId")
    if template_id:
        return response.ec2_backend.get_launch_template(template_id)
    return response.ec2_backend.get_launch_template_by_name(response._get_param("LaunchTemplateName"))


_create_version = LaunchTemplates.create_launch_template_version


def create_launch_template_version(self):
    given = self._get_param("LaunchTemplateData", {}) or {}
    source = self._get_param("SourceVersion")
    template = _template(self)
    entry = {
        "templateId": template.id,
        "sourceVersion": source,
        "givenFields": sorted(given),
        "givenImageId": given.get("ImageId"),
        "description": self._get_param("VersionDescription"),
    }
    data = given
    if source is not None:
        base = template.get_version(source)
        entry["sourceNumber"] = base.number
        entry["sourceData"] = base.data
        data = copy.deepcopy(base.data)
        data.update(given)
    get_param = self._get_param
    self._get_param = lambda name, default=None, **kw: data if name == "LaunchTemplateData" else get_param(name, default, **kw)
    try:
        result = _create_version(self)
    finally:
        del self._get_param
    made = template.latest_version()
    entry["versionNumber"] = made.number
    entry["data"] = made.data
    _record(entry)
    return result


_describe_versions = LaunchTemplates.describe_launch_template_versions


def describe_launch_template_versions(self):
    if not self._get_bool_param("ResolveAlias", False):
        return _describe_versions(self)
    from moto.ssm.models import ssm_backends

    ssm = ssm_backends[self.current_account][self.region]
    backend = self.ec2_backend
    describe = backend.describe_launch_template_versions

    def resolved(**kwargs):
        out = []
        for template, version in describe(**kwargs):
            image = version.data.get("ImageId", "")
            if isinstance(image, str) and image.startswith("resolve:ssm:"):
                parameter = ssm.get_parameter(image.removeprefix("resolve:ssm:"))
                version = copy.copy(version)
                version.data = dict(version.data, ImageId=parameter.value if parameter else image)
            out.append((template, version))
        return out

    backend.describe_launch_template_versions = resolved
    try:
        return _describe_versions(self)
    finally:
        del backend.describe_launch_template_versions


LaunchTemplates.create_launch_template_version = create_launch_template_version
LaunchTemplates.describe_launch_template_versions = describe_launch_template_versions

if __name__ == "__main__":
    main()
