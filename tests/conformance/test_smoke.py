from tests.conformance.conftest import Mesh


async def test_describe_and_list_over_the_wire(mesh: Mesh) -> None:
    reader = mesh.caller("reader")
    bound = await reader.describe()
    assert sorted(bound.descriptor["clusters"][0]["commands"]) == sorted(
        r["name"] for r in bound.document["commands"]
    )
    page = await reader.ok("list-tasks")
    assert page["tasks"] == []
