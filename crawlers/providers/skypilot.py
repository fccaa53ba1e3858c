"""SkyPilot catalog sources: one per SkyPilot cloud, named ``skypilot:<cloud>``, read by
``crawlers/platforms/skypilot.py`` (``skypilot_source`` says what each row's options mean).

Not imported: ``gcp`` (its GPU machine types carry no accelerator and the GPUs are priced
as separate accelerator-only rows; combining them is the first-party GCP source's job),
``kubernetes`` and ``slurm`` (no public prices), and clouds without a provider in our
reference data yet (``daytona``, ``lium``, ``spheron``, ``yotta``, ``simplepod``).
"""

from __future__ import annotations

from crawlers.platforms.skypilot import SkyPilotCatalog, skypilot_source

SOURCES: list[type[SkyPilotCatalog]] = [
    # hyperscalers (first-party sources exist; listings prefer them:
    # see service/query/precedence.py)
    skypilot_source(
        "aws", fixture="aws.csv", note="AvailabilityZone holds AZ ids: prices are per region."
    ),
    skypilot_source("azure", version="v6"),
    skypilot_source("oci", "oracle"),
    # GPU clouds
    skypilot_source("lambda", fixture="lambda.csv"),
    skypilot_source("nebius", gpu_memory=None, note="GpuInfo memory is host RAM."),
    skypilot_source("paperspace", version="v6"),
    skypilot_source("do", "digitalocean", version="v6", fixture="do.csv"),
    skypilot_source(
        "scaleway",
        currency="EUR",
        fixture="scaleway.csv",
        version="v6",
        region_mode="zone",
        note="Scaleway bills in EUR; prices are per zone (fr-par-2).",
    ),
    skypilot_source(
        "ovhcloud",
        version="v6",
        region_mode="zone",
        note="Scraped from ovhcloud.com/en (international site, USD); zones are GRA11, BHS5...",
    ),
    skypilot_source(
        "seeweb", currency="EUR", note="Seeweb (Italy) bills in EUR; some rows lack a region."
    ),
    skypilot_source("fluidstack", version="v6"),
    skypilot_source("cudo"),
    skypilot_source("hyperbolic"),
    skypilot_source("hyperstack"),
    skypilot_source("jarvislabs"),
    skypilot_source("mithril", note="Formerly Foundry."),
    skypilot_source("verda", "datacrunch", note="Verda is DataCrunch's new name."),
    skypilot_source(
        "runpod",
        fixture="runpod.csv",
        region_mode="zone",
        country_rule="iso-code",
        gpu_memory=None,
        note="Region is a country code, AvailabilityZone the data centre; GpuInfo memory is GB.",
    ),
    # marketplaces and aggregators
    skypilot_source(
        "vast",
        "vastai",
        fixture="vast.csv",
        gpu_memory="total",
        country_rule="vast-location",
        note="Hosts vary: one instance type in one location may have several prices (floor).",
    ),
    skypilot_source(
        "primeintellect",
        fixture="primeintellect.csv",
        region_mode="zone",
        country_rule="iso-code",
        gpu_memory="total",
        note="Aggregator: InstanceType names the upstream cloud.",
    ),
    skypilot_source(
        "shadeform", "shadeform", gpu_memory=None, note="Aggregator; GpuInfo memory is GB."
    ),
]
