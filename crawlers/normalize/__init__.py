"""Pure helpers shared by every source: GPU names, regions, units, price strings."""
