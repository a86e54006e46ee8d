# Generates gmsh-written fixtures for jello's mesh reader tests.
import gmsh, meshio, numpy as np, json
gmsh.initialize()
gmsh.option.setNumber("General.Terminal", 0)
gmsh.model.add("box")
gmsh.model.occ.addBox(0, 0, 0, 1.0, 0.8, 0.6)
gmsh.model.occ.synchronize()
gmsh.option.setNumber("Mesh.MeshSizeMax", 0.45)
gmsh.option.setNumber("Mesh.MeshSizeFromPoints", 0)
gmsh.option.setNumber("Mesh.MeshSizeFromCurvature", 0)
gmsh.option.setNumber("Mesh.MeshSizeExtendFromBoundary", 0)
gmsh.model.mesh.generate(3)
types, tags, nodes = gmsh.model.mesh.getElements(3)
ntets = sum(len(t) for ty, t in zip(types, tags) if ty == 4)
ntag, coord, _ = gmsh.model.mesh.getNodes()
print("nodes", len(ntag), "tets", ntets)
for ver in ["2.2", "4.0", "4.1"]:
    for binary in ([0] if ver == "4.0" else [0, 1]):
        gmsh.option.setNumber("Mesh.MshFileVersion", float(ver))
        gmsh.option.setNumber("Mesh.Binary", binary)
        gmsh.option.setNumber("Mesh.SaveAll", 1)
        gmsh.write(f"gmsh_box_v{ver.replace('.', '')}_{'bin' if binary else 'ascii'}.msh")
gmsh.finalize()
m = meshio.read("gmsh_box_v41_ascii.msh")
tet = m.cells_dict["tetra"]
p = m.points
v = np.einsum("ij,ij->i", p[tet[:,1]]-p[tet[:,0]], np.cross(p[tet[:,2]]-p[tet[:,0]], p[tet[:,3]]-p[tet[:,0]]))/6
print("meshio tets", len(tet), "points", len(p), "abs vol", np.abs(v).sum(), "neg", (v<0).sum())
only = meshio.Mesh(p, [("tetra", tet)])
meshio.write("meshio_box.mesh", only)
meshio.write("meshio_box_ascii.vtk", only, binary=False)
meshio.write("meshio_box_bin.vtk", only, binary=True)
