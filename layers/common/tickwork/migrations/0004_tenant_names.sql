-- Tickwork schema, version 4: a tenant's name is unique, compared without case ("Acme" and "acme" are
-- one tenant to the operator who reads them), so two concurrent create-tenant calls cannot both succeed.

-- Databases from before this version may hold repeats: the oldest keeps its name, each later one gets
-- its id appended ("acme (3f2b...)"), so the index below can be built and no tenant or key is lost.
UPDATE tenants AS t
SET name = t.name || ' (' || t.id::text || ')'
FROM (
    SELECT id, row_number() OVER (PARTITION BY lower(name) ORDER BY created_at, id) AS nth
    FROM tenants
) AS ranked
WHERE ranked.id = t.id AND ranked.nth > 1;

CREATE UNIQUE INDEX tenants_name_unique ON tenants (lower(name));
