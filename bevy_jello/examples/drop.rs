//! Soft bodies dropped onto the ground: `cargo run --release --example drop --features windowed`
//! from bevy_jello/.

use bevy::prelude::*;
use bevy_jello::prelude::*;

fn main() {
    App::new()
        .add_plugins((DefaultPlugins, JelloPlugin::default()))
        .add_systems(Startup, setup)
        .run();
}

fn setup(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    // The soft bodies: a ball and a box, each with a PBR look.
    commands.spawn(Ground { height: 0.0 });
    commands.spawn((
        SoftBody::ball(0.1, 8),
        Transform::from_xyz(-0.15, 0.4, 0.0),
        MeshMaterial3d(materials.add(Color::srgb(0.3, 0.6, 1.0))),
    ));
    commands.spawn((
        SoftBody::cuboid(Vec3::splat(0.15), [3, 3, 3]),
        Transform::from_xyz(0.15, 0.6, 0.0),
        MeshMaterial3d(materials.add(Color::srgb(1.0, 0.5, 0.3))),
    ));

    // The scene around them: a floor to see, a light, a camera.
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(2.0, 2.0))),
        MeshMaterial3d(materials.add(Color::srgb(0.8, 0.8, 0.8))),
    ));
    commands.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(1.0, 2.0, 1.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.spawn((
        Camera3d::default(),
        Transform::from_xyz(0.0, 0.5, 1.2).looking_at(Vec3::new(0.0, 0.15, 0.0), Vec3::Y),
    ));
}
