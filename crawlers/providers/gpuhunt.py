"""gpuhunt catalog sources: one per provider dstack publishes, named ``gpuhunt:<provider>``.

gpuhunt publishes only its offline providers (below); its online providers (vastai, vultr,
crusoe, digitalocean, hotaisle, jarvislabs, seeweb) are queried live by the library and have
no published catalog. Prices are USD per hour for all of them. The parsing is in
``crawlers/platforms/gpuhunt.py``.
"""

from __future__ import annotations

from crawlers.platforms.gpuhunt import GpuhuntCatalog, gpuhunt_source

SOURCES: list[type[GpuhuntCatalog]] = [
    gpuhunt_source("aws", "aws"),
    gpuhunt_source("azure", "azure"),
    gpuhunt_source(
        "gcp", "gcp", fixture="gcp.csv", zone_locations=True, note="Locations are zones."
    ),
    gpuhunt_source("oci", "oracle"),
    gpuhunt_source("lambdalabs", "lambda", fixture="lambdalabs.csv"),
    gpuhunt_source(
        "nebius",
        "nebius",
        fixture="nebius.csv",
        sku_mode="shape",
        note="One platform, several presets.",
    ),
    gpuhunt_source(
        "runpod",
        "runpod",
        fixture="runpod.csv",
        sku_mode="gpus",
        country_rule="iso-code",
        note="instance_name is the GPU type; community cloud locations are country codes.",
    ),
    gpuhunt_source("verda", "datacrunch", note="Verda is DataCrunch's new name."),
    gpuhunt_source("cloudrift", "cloudrift", sku_mode="shape"),
]
